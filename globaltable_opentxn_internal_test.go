package eddy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
)

// A global topic with a transaction that stays open (its producer stalled, with a
// transaction timeout longer than the application's) in front of a committed record:
// past the wait's bound the bootstrap goes on without the record, and does not fail
// (the application would not start for as long as another application's transaction
// stays open); once the stores are up, reads never wait, and the record is read as soon
// as the transaction ends.
func TestGlobalReadsBehindAnOpenTxn(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		topic := c.Unique("glob")
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		put := func(k string) {
			m := &sarama.ProducerMessage{Key: sarama.StringEncoder(k), Value: sarama.StringEncoder("v")}
			if err := c.ProduceToPartition(ctx, topic, 0, m); err != nil {
				t.Fatal(err)
			}
		}
		put("before")
		p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("stalled"), TransactionTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Send(ctx, topic, 0, []byte("zombie"), []byte("v"), nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		put("behind")

		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		gs := &graph.GlobalStore{Store: &graph.Store{Name: "g"}, Topic: topic,
			Entry: func(rec graph.RawRecord) ([]byte, []byte, bool, error) { return rec.Key, rec.Value, false, nil }}
		backend := kvstore.NewMemoryBackend()
		g := &globalState{client: client, fail: func(error) {}, stores: []*graph.GlobalStore{gs}, backend: backend,
			logger: slog.New(slog.DiscardHandler), next: map[string]map[int32]int64{}, stableWait: 300 * time.Millisecond}
		has := func(k string) bool {
			v, err := backend.Get("g", []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			return v != nil
		}

		// The bootstrap: past the bound it goes on without the record behind.
		if err := g.catchUp(ctx); err != nil {
			t.Fatalf("bootstrap behind an open transaction past the wait's bound: %v; want it to go on", err)
		}
		if !has("before") || has("behind") || has("zombie") {
			t.Fatalf("after the bootstrap: before=%v behind=%v zombie=%v; want only the record before the open transaction", has("before"), has("behind"), has("zombie"))
		}

		// Running: a read while the transaction is open does not wait (other stores and
		// partitions would stop updating); the record behind comes once it ends.
		g.ready = true
		g.stableWait = time.Minute
		began := time.Now()
		if err := g.catchUp(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("a read of the running global stores took %v: it waited for the open transaction", took)
		}
		if err := p.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !has("behind") {
			if time.Now().After(deadline) {
				t.Fatal("the record committed behind the aborted transaction never reached the global store")
			}
			if err := g.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if has("zombie") {
			t.Error("the aborted transaction's record is in the global store")
		}
	})
}
