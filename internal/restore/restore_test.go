package restore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/kafkatest"
)

// writeChangelog writes transactions of key/value changes to partition 0 of topic; the
// transactions whose index is in abort are aborted. It returns the expected store: the
// last committed value per key, deletes applied.
// settledEnd returns the changelog's last stable offset once every transaction written
// so far has its marker: a producer's commit returns before the coordinator has written
// the markers to the partitions (Kafka writes them asynchronously; kfake at once), so the
// end read right after writeChangelog can still be short of the last transaction.
func settledEnd(t *testing.T, client sarama.Client, topic string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, end, err := kread.EndOffsets(client, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		hwm, err := kread.HighWaterMark(client, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if end == hwm {
			return end
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last stable offset %d still below the high-water mark %d after 30 s", topic, end, hwm)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeChangelog(t *testing.T, c *kafkatest.Cluster, topic string, txns int, perTxn int, abort map[int]bool) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("txn")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := map[string]string{}
	for i := 0; i < txns; i++ {
		pending := map[string]*string{}
		for j := 0; j < perTxn; j++ {
			key := fmt.Sprintf("key-%03d", (i*perTxn+j*7)%150)
			var value []byte
			if (i+j)%11 != 0 {
				value = []byte(fmt.Sprintf("v%d.%d", i, j))
			}
			if err := p.Send(ctx, topic, 0, []byte(key), value, nil, time.Now()); err != nil {
				t.Fatal(err)
			}
			if value == nil {
				pending[key] = nil
			} else {
				s := string(value)
				pending[key] = &s
			}
		}
		if abort[i] {
			if err := p.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := p.Commit(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
		for k, v := range pending {
			if v == nil {
				delete(want, k)
			} else {
				want[k] = *v
			}
		}
	}
	return want
}

func storeContent(t *testing.T, b kvstore.Backend, store string) map[string]string {
	t.Helper()
	it, err := b.Iterate(store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	got := map[string]string{}
	for it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func sameContent(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("store has %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %q = %q, want %q", k, got[k], v)
		}
	}
}

func TestRestoreSkipsAbortedTransactionsAndResumes(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := context.Background()
		topic := c.Unique("store-changelog")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		want := writeChangelog(t, c, topic, 40, 50, map[int]bool{3: true, 17: true, 39: true})
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		end := settledEnd(t, client, topic)

		backend := kvstore.NewMemoryBackend()
		// A small fetch size forces many batches; the first progress report stops it,
		// as a rebalance would.
		stopCtx, stop := context.WithCancel(ctx)
		var reportedEnd int64
		r := &restore.Restorer{Client: client, FetchMaxBytes: 4096, OnProgress: func(p restore.Progress) {
			if !p.Finished {
				reportedEnd = p.End
				stop()
			}
		}}
		res, err := r.Restore(stopCtx, backend, "s", topic, 0)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted restore: got %v, want context.Canceled", err)
		}
		if reportedEnd != end {
			t.Fatalf("progress reported End %d; want the end offset %d (stale queries count the lag with it)", reportedEnd, end)
		}
		cp, ok, err := backend.Checkpoint("s")
		if err != nil || !ok || cp <= 0 || cp >= end {
			t.Fatalf("checkpoint after the interruption: %d %v %v; want strictly inside (0, %d)", cp, ok, err, end)
		}
		if !res.Wiped || res.Records == 0 {
			t.Fatalf("interrupted restore result: %+v", res)
		}

		// Resuming reads from the checkpoint, not from zero.
		r.OnProgress = nil
		res, err = r.Restore(ctx, backend, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.From != cp || res.To != end || res.Wiped {
			t.Fatalf("resumed restore: %+v, want from the checkpoint %d to %d without wiping", res, cp, end)
		}
		if cp2, _, _ := backend.Checkpoint("s"); cp2 != end {
			t.Fatalf("final checkpoint %d, want the end offset %d", cp2, end)
		}
		sameContent(t, storeContent(t, backend, "s"), want)

		// Up to date: nothing is read.
		res, err = r.Restore(ctx, backend, "s", topic, 0)
		if err != nil || res.Records != 0 {
			t.Fatalf("restore of an up-to-date store: %+v %v", res, err)
		}
	})
}

func TestRestoreWipesAStoreAheadOfItsChangelog(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := context.Background()
		topic := c.Unique("store-changelog")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		want := writeChangelog(t, c, topic, 3, 10, nil)
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		backend := kvstore.NewMemoryBackend()
		// A checkpoint past the end: the topic was recreated under the store.
		if err := backend.Write(kvstore.Batch{
			Writes:      map[string][]kvstore.Entry{"s": {{Key: []byte("stale"), Value: []byte("x")}}},
			Checkpoints: map[string]int64{"s": 1 << 40},
		}); err != nil {
			t.Fatal(err)
		}
		res, err := (&restore.Restorer{Client: client}).Restore(ctx, backend, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Wiped {
			t.Fatalf("restore did not wipe a store whose checkpoint is past the end: %+v", res)
		}
		sameContent(t, storeContent(t, backend, "s"), want)
	})
}

// TestRestoreFromEmptyOnBolt: on bbolt, a restore from empty is built in key order
// (kvstore.BulkRestorer, with a budget small enough to spill runs). Interrupted
// while reading or while loading, it leaves the store empty with no checkpoint and no
// run files; run to the end it gives the store a plain restore (NoBulk) gives.
func TestRestoreFromEmptyOnBolt(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := context.Background()
		topic := c.Unique("store-changelog")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		want := writeChangelog(t, c, topic, 40, 50, map[int]bool{5: true, 22: true})
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		end := settledEnd(t, client, topic)
		for name, load := range map[string]kvstore.BulkLoad{"in-place": kvstore.LoadInPlace, "new-file": kvstore.LoadNewFile} {
			t.Run(name, func(t *testing.T) { restoreFromEmptyOnBolt(t, client, topic, end, want, load) })
		}
	})
}

// restoreFromEmptyOnBolt is TestRestoreFromEmptyOnBolt's restore, with the given load.
func restoreFromEmptyOnBolt(t *testing.T, client sarama.Client, topic string, end int64, want map[string]string, load kvstore.BulkLoad) {
	ctx := context.Background()
	dir := t.TempDir()
	backend, err := kvstore.OpenBolt(dir, kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	stillEmpty := func(what string) {
		t.Helper()
		if cp, ok, err := backend.Checkpoint("s"); err != nil || ok {
			t.Fatalf("%s: checkpoint %d %v %v; want none", what, cp, ok, err)
		}
		if n, err := backend.Count("s"); err != nil || n != 0 {
			t.Fatalf("%s: %d keys (%v); want none", what, n, err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".restore-*")); len(left) > 0 {
			t.Fatalf("%s: run files left: %v", what, left)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*.build")); len(left) > 0 {
			t.Fatalf("%s: build file left: %v", what, left)
		}
	}
	r := &restore.Restorer{Client: client, FetchMaxBytes: 4096, FromEmpty: kvstore.BulkRestorerOptions{MaxBytes: 2048, TxBytes: 1024, Load: load}}

	// Interrupted while reading, as a rebalance would.
	stopCtx, stop := context.WithCancel(ctx)
	r.OnProgress = func(p restore.Progress) {
		if !p.Finished && p.Done > p.Total/2 {
			stop()
		}
	}
	if res, err := r.Restore(stopCtx, backend, "s", topic, 0); !errors.Is(err, context.Canceled) || !res.Wiped || res.Records == 0 {
		t.Fatalf("interrupted restore: %+v %v; want context.Canceled after some records", res, err)
	}
	stillEmpty("interrupted while reading")

	// Interrupted after the last fetch, before the load.
	stopCtx, stop = context.WithCancel(ctx)
	r.OnProgress = func(p restore.Progress) {
		if !p.Finished && p.Done == p.Total {
			stop()
		}
	}
	if _, err := r.Restore(stopCtx, backend, "s", topic, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("restore interrupted before the load: %v; want context.Canceled", err)
	}
	stillEmpty("interrupted before the load")

	r.OnProgress = nil
	res, err := r.Restore(ctx, backend, "s", topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Wiped || res.From != 0 || res.To != end {
		t.Fatalf("restore from empty: %+v", res)
	}
	if cp, ok, _ := backend.Checkpoint("s"); !ok || cp != end {
		t.Fatalf("checkpoint %d (%v), want %d", cp, ok, end)
	}
	sameContent(t, storeContent(t, backend, "s"), want)

	// The plain path gives the same store.
	plain, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := (&restore.Restorer{Client: client, NoBulk: true}).Restore(ctx, plain, "s", topic, 0); err != nil {
		t.Fatal(err)
	}
	sameContent(t, storeContent(t, plain, "s"), storeContent(t, backend, "s"))
}

// TestRestoreLongTailOnBolt: a tail far longer than the store is merged into it in a
// new file (the file is replaced), and the store equals a plain restore of the whole
// changelog; an interrupted one leaves the store at its checkpoint.
func TestRestoreLongTailOnBolt(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := context.Background()
		topic := c.Unique("store-changelog")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		writeChangelog(t, c, topic, 4, 50, nil)
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		dir := t.TempDir()
		backend, err := kvstore.OpenBolt(dir, kvstore.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer backend.Close()
		r := &restore.Restorer{Client: client, BulkTailMin: 1, FetchMaxBytes: 4096, FromEmpty: kvstore.BulkRestorerOptions{MaxBytes: 2048}}
		if _, err := r.Restore(ctx, backend, "s", topic, 0); err != nil {
			t.Fatal(err)
		}
		cp, _, _ := backend.Checkpoint("s")
		head := storeContent(t, backend, "s")
		writeChangelog(t, c, topic, 40, 50, map[int]bool{3: true})
		end := settledEnd(t, client, topic)
		if keys := int64(len(head)); end-cp <= 4*keys {
			t.Fatalf("tail %d offsets, store %d keys: not far larger", end-cp, keys)
		}
		path := filepath.Join(dir, kvstore.BoltFileName)
		before, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}

		stopCtx, stop := context.WithCancel(ctx)
		r.OnProgress = func(p restore.Progress) {
			if !p.Finished && p.Done > p.Total/2 {
				stop()
			}
		}
		if _, err := r.Restore(stopCtx, backend, "s", topic, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted tail: %v, want context.Canceled", err)
		}
		if got, _, _ := backend.Checkpoint("s"); got != cp {
			t.Fatalf("interrupted tail: checkpoint %d, want %d", got, cp)
		}
		sameContent(t, storeContent(t, backend, "s"), head)

		r.OnProgress = nil
		res, err := r.Restore(ctx, backend, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Wiped || res.From != cp || res.To != end {
			t.Fatalf("tail restore: %+v, want from %d to %d", res, cp, end)
		}
		after, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(before, after) {
			t.Fatal("the long tail was not merged into a new file")
		}
		if got, _, _ := backend.Checkpoint("s"); got != end {
			t.Fatalf("checkpoint %d, want %d", got, end)
		}
		plain, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if _, err := (&restore.Restorer{Client: client, NoBulk: true}).Restore(ctx, plain, "s", topic, 0); err != nil {
			t.Fatal(err)
		}
		sameContent(t, storeContent(t, backend, "s"), storeContent(t, plain, "s"))
	})
}
