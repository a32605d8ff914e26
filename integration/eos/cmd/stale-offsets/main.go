//go:build unix

// Command stale-offsets reproduces, without eddy, the broker behaviour behind the
// duplicates of eddy's long exactly-once run: right after a kill -9 and restart of a
// single-node Kafka (4.1.1, KRaft), the group coordinator can answer OffsetFetch with
// committed offsets older than the ones it acknowledged before the kill (often none,
// -1), for a few seconds. A consumer group that resumes then reprocesses input.
//
// Each try commits offsets 1..N of one partition for a fresh group (plain OffsetCommit,
// or one transaction per commit with -txn), kills the broker with integration/kafka.sh
// kill9 right away, restarts it, and polls OffsetFetch (with RequireStable) for 10 s.
// The broker must be one the command may kill: integration/kafka.sh configured by its
// environment (EDDY_KAFKA_HOME, EDDY_KAFKA_PORT, EDDY_KAFKA_CONTROLLER_PORT).
//
//	EDDY_KAFKA_HOME=/tmp/eddy-kafka-eos EDDY_KAFKA_PORT=29092 EDDY_KAFKA_CONTROLLER_PORT=29093 \
//	  go run ./integration/eos/cmd/stale-offsets -kafka-script integration/kafka.sh -tries 5
//
// It exits 1 when a try saw a stale answer, 0 when none did, 2 on errors.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/integration/eos"
	"github.com/eddy-streams/eddy/kafkatest"
)

func main() { os.Exit(run()) }

func run() int {
	script := flag.String("kafka-script", "integration/kafka.sh", "integration/kafka.sh; its broker is killed and restarted")
	commits := flag.Int("commits", 2000, "offsets to commit before the kill")
	txn := flag.Bool("txn", false, "commit each offset in a transaction (TxnOffsetCommit), as eddy does")
	tries := flag.Int("tries", 3, "kill -9 and restart this many times")
	flag.Parse()
	ctx := context.Background()
	b := eos.ScriptBroker{Script: *script}
	addr, err := b.Start(ctx) // prints the address of the running broker, or starts a fresh one
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := kafkatest.Dial(ctx, "kafka", []string{addr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	stale := 0
	for try := 1; try <= *tries; try++ {
		suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
		topic, group := "stale-offsets-"+suffix, "stale-offsets-group-"+suffix
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := commit(addr, topic, group, *commits, *txn, suffix); err != nil {
			fmt.Fprintln(os.Stderr, "stale-offsets: commit:", err)
			return 2
		}
		before, err := c.CommittedOffsets(ctx, group, topic)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := b.Kill(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := b.Restart(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		restarted := time.Now()
		seen := false
		for time.Since(restarted) < 10*time.Second {
			got, err := c.CommittedOffsets(ctx, group, topic)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			if got[0] != before[0] {
				fmt.Printf("try %d: STALE: committed %d before kill -9; OffsetFetch %.1fs after the restart returned %d\n", try, before[0], time.Since(restarted).Seconds(), got[0])
				seen = true
			} else if seen {
				fmt.Printf("try %d: %.1fs after the restart: %d, as committed\n", try, time.Since(restarted).Seconds(), got[0])
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if seen {
			stale++
		} else {
			fmt.Printf("try %d: %d, as committed, for 10 s after the restart\n", try, before[0])
		}
	}
	fmt.Printf("stale-offsets: %d of %d restarts served stale committed offsets\n", stale, *tries)
	if stale > 0 {
		return 1
	}
	return 0
}

// commit commits offsets 1..n of partition 0 of topic for group.
func commit(addr, topic, group string, n int, txn bool, suffix string) error {
	cfg := kafkatest.NewSaramaConfig()
	if !txn {
		client, err := sarama.NewClient([]string{addr}, cfg)
		if err != nil {
			return err
		}
		defer client.Close()
		om, err := sarama.NewOffsetManagerFromClient(group, client)
		if err != nil {
			return err
		}
		defer om.Close()
		pom, err := om.ManagePartition(topic, 0)
		if err != nil {
			return err
		}
		defer pom.Close()
		for i := 1; i <= n; i++ {
			pom.MarkOffset(int64(i), "")
			om.Commit()
		}
		return nil
	}
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "stale-offsets-" + suffix
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	for i := 1; i <= n; i++ {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		if err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: int64(i)}}}, group); err != nil {
			return err
		}
		if err := p.CommitTxn(); err != nil {
			return err
		}
	}
	return nil
}
