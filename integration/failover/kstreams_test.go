//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// The Kafka Streams child speaks the driver's event lines: every task's first record,
// running tasks and a group generation in its status, and, after a SIGKILL and a start
// on the same state dir (exactly-once: Kafka Streams wipes a store it did not close
// cleanly), the full changelog restored, 200 records for 200 keys. Real Kafka only
// (Kafka Streams against the embedded broker is not what -impl kstreams measures);
// it builds the Maven project, about a minute with a warm ~/.m2.
func TestKStreamsChildReports(t *testing.T) {
	addrs := kafkatest.BrokersFromEnv()
	if len(addrs) == 0 {
		t.Skipf("%s is not set: no real Kafka to run Kafka Streams against (see integration/kafka.sh)", kafkatest.BrokersEnv)
	}
	build, cancelBuild := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelBuild()
	im, err := buildImpl(build, "kstreams", t.TempDir(), 10_000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := kafkatest.Connect(t, kafkatest.KafkaName, addrs)
	app := c.Unique("ksfailover")
	input := app + "-input"
	defer deleteTopics(addrs, app)
	const partitions, keys = 4, 200
	if err := c.CreateTopic(ctx, input, partitions, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		t.Helper()
		var msgs []*sarama.ProducerMessage
		for i := from; i < from+n; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder("key-" + strconv.Itoa(i)), Value: sarama.ByteEncoder("v")})
		}
		if err := c.Produce(ctx, input, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	s := spec{Brokers: addrs, App: app, Input: input, StateDir: t.TempDir(), Impl: im}
	allTasks := make([]string, partitions)
	for i := range allTasks {
		allTasks[i] = fmt.Sprintf("0_%d", i)
	}
	// waitAll waits until p reported a first record of every task after since.
	waitAll := func(p *proc, since time.Time) {
		t.Helper()
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			n := 0
			for _, task := range allTasks {
				if at, ok := p.firsts()[task]; ok && at.After(since) {
					n++
				}
			}
			if n == partitions {
				return
			}
		}
		t.Fatalf("the Kafka Streams child did not report a first record of every task %v: %v, status %+v", allTasks, p.firsts(), p.status())
	}

	began := time.Now()
	p, err := startChild(s)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.kill() }()
	produce(0, keys)
	waitAll(p, began)
	for ctx.Err() == nil {
		lag, err := groupLag(ctx, c, app, input)
		if err != nil {
			t.Fatal(err)
		}
		if st := p.status(); lag == 0 && len(st.Active) == partitions && st.Gen > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := p.status(); len(st.Active) != partitions || st.Gen <= 0 {
		t.Fatalf("status %+v: want %d running tasks and a generation", st, partitions)
	}

	p.kill()
	restarted := time.Now()
	if p, err = startChild(s); err != nil {
		t.Fatal(err)
	}
	produce(keys, partitions*10)
	waitAll(p, restarted)
	var got int64
	for _, task := range allTasks {
		got += restoredSince([]*proc{p}, task, restarted)
	}
	if got != keys {
		t.Errorf("restored %d changelog records after the SIGKILL, want %d (every key's one put)", got, keys)
	}
	p.term()
	if os.Getenv("CI") == "" {
		t.Logf("Kafka Streams child: %v from start to every task restored and processing again", time.Since(restarted).Round(time.Millisecond))
	}
}
