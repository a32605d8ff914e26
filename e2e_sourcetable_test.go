package eddy_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// A table read from a topic uses the topic as its changelog: no changelog topic is
// made for its store, and an instance that lost its state restores the store from the
// topic, up to the committed input offset; the updates written while it was down are
// processed as input. The joins give the same results as before the loss.
func TestSourceTableRestoresFromItsTopic(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		users, clicks, out := c.Unique("st-users"), c.Unique("st-clicks"), c.Unique("st-out")
		for _, topic := range []string{users, clicks, out} {
			if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
				t.Fatal(err)
			}
		}
		str := serde.String()
		produce := func(topic string, kvs ...string) {
			t.Helper()
			var recs []processor.Record[string, string]
			for i := 0; i < len(kvs); i += 2 {
				recs = append(recs, processor.Record[string, string]{Key: kvs[i], Value: kvs[i+1]})
			}
			if err := kafkatest.ProduceTyped(ctx, c, topic, str, str, recs...); err != nil {
				t.Fatal(err)
			}
		}
		const store = "st-users-store"
		b := stream.NewBuilder()
		u := stream.TableFrom(b, str, str, users, stream.Materialized(store))
		stream.Join(stream.From(b, str, str, []string{clicks}), u, func(c, name string) string { return c + "@" + name }).To(out, str, str)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		appID := c.Unique("st")
		var mu sync.Mutex
		restored := map[string]int64{}
		cfg := func() eddy.Config {
			return eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t),
				OnRestore: func(_ processor.TaskID, r changelog.Result) {
					mu.Lock()
					restored[r.Store] += r.Records
					mu.Unlock()
				}}
		}
		var userKVs []string
		for i := range 10 {
			userKVs = append(userKVs, fmt.Sprintf("u%d", i), fmt.Sprintf("name%d", i))
		}
		produce(users, userKVs...)
		outputs := func() []string {
			recs, err := kafkatest.ReadCommittedTyped(ctx, c, out, str, str)
			if err != nil {
				t.Fatal(err)
			}
			var vs []string
			for _, r := range recs {
				vs = append(vs, r.Key+"="+r.Value)
			}
			return vs
		}
		in := start(t, topo, cfg())
		// The table first: a click read before its user is dropped by the inner join.
		if err := c.WaitProcessed(ctx, appID, users); err != nil {
			t.Fatal(err)
		}
		var clickKVs []string
		for i := range 10 {
			clickKVs = append(clickKVs, fmt.Sprintf("u%d", i), fmt.Sprintf("c%d", i))
		}
		produce(clicks, clickKVs...)
		waitFor(t, time.Minute, "the first joins", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			return len(outputs()) >= 10, nil
		})
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}

		// Written while down: input the restart processes (not restored).
		produce(users, "u0", "renamed")
		mu.Lock()
		clear(restored)
		mu.Unlock()
		in = start(t, topo, cfg()) // a new state dir: the store is restored
		if err := c.WaitProcessed(ctx, appID, users); err != nil {
			t.Fatal(err)
		}
		produce(clicks, "u0", "again", "u5", "again")
		waitFor(t, time.Minute, "the joins after the restore", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			return len(outputs()) >= 12, nil
		})
		got := strings.Join(outputs(), " ")
		for _, want := range []string{"u0=again@renamed", "u5=again@name5", "u3=c3@name3"} {
			if !strings.Contains(got, want) {
				t.Errorf("output %q lacks %q", got, want)
			}
		}
		mu.Lock()
		n := restored[store]
		mu.Unlock()
		if n != 10 {
			t.Errorf("restored %d records of the users' topic, want the 10 committed ones", n)
		}
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		admin, err := sarama.NewClusterAdmin(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		for name := range topics {
			if strings.Contains(name, store) {
				t.Errorf("topic %q was made for the source table's store", name)
			}
		}
	})
}
