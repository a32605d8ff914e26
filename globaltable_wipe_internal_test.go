package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/kafkatest"
)

// crashAfter is the global backend of a process that dies (kill -9) right after the
// global store's wipe and the re-read of partition 0: nothing written after that
// reaches the file.
type crashAfter struct {
	kvstore.Backend
	ck      string
	wiped   atomic.Bool
	crashed atomic.Bool
}

func (b *crashAfter) Wipe(store string) error {
	err := b.Backend.Wipe(store)
	b.wiped.Store(true)
	return err
}

func (b *crashAfter) Write(batch kvstore.Batch) error {
	if b.crashed.Load() {
		return errors.New("process killed")
	}
	err := b.Backend.Write(batch)
	if _, ok := batch.Checkpoints[b.ck]; ok && b.wiped.Load() {
		b.crashed.Store(true)
	}
	return err
}

// TestGlobalWipeCrashKeepsEveryPartition: a global store whose checkpoint of one
// partition is below that partition's log start is wiped and read again from the start,
// every partition. The process dies once the first partition was read again. The wipe
// must have forgotten the other partitions' checkpoints with the data (it used to keep
// them: the next start read only their tails, and their earlier records were missing
// from the store for good).
func TestGlobalWipeCrashKeepsEveryPartition(t *testing.T) {
	kafkatest.ForEachCluster(t, testGlobalWipeCrashKeepsEveryPartition)
}

func testGlobalWipeCrashKeepsEveryPartition(t *testing.T, c *kafkatest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := c.Unique("glob")
	if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		for i := range 5 {
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("p%d-k%d", p, i)), Value: sarama.StringEncoder("v")}
			if err := c.ProduceToPartition(ctx, topic, p, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dir := t.TempDir()
	be, err := kvstore.OpenBolt(dir, kvstore.BoltOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	gs := &graph.GlobalStore{Store: &graph.Store{Name: "g"}, Topic: topic,
		Entry: func(rec graph.RawRecord) ([]byte, []byte, bool, error) { return rec.Key, rec.Value, false, nil }}
	newState := func(b kvstore.Backend) *globalState {
		return &globalState{client: client, fail: func(error) {}, stores: []*graph.GlobalStore{gs}, backend: b,
			logger: slog.New(slog.DiscardHandler), next: map[string]map[int32]int64{}}
	}
	count := func() int64 {
		n, err := be.Count("g")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// First run: the store holds the 10 keys.
	if err := newState(be).catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 10 {
		t.Fatalf("after the first run the store holds %d keys, want 10", n)
	}
	// While the instance is down, partition 0 gets 5 more keys and retention deletes
	// everything below its end: its log start passes the store's checkpoint. Partition 1
	// is untouched.
	for i := 5; i < 10; i++ {
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("p0-k%d", i)), Value: sarama.StringEncoder("v")}
		if err := c.ProduceToPartition(ctx, topic, 0, m); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 8}); err != nil {
		t.Fatal(err)
	}
	// Second run: partition 0 is behind its log start: wipe, read every partition again;
	// the process dies once partition 0 was read again.
	crash := &crashAfter{Backend: be, ck: names.GlobalCheckpoint("g", 0)}
	err = newState(crash).catchUp(ctx)
	t.Logf("second run (killed): %v", err)
	// Third run: a fresh start on the same file. The store must hold partition 0's live
	// keys (p0-k8, p0-k9) and all five of partition 1 (still in the topic).
	if err := newState(be).catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for i := range 5 {
		k := fmt.Sprintf("p1-k%d", i)
		v, err := be.Get("g", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		ck, _, _ := be.Checkpoint(names.GlobalCheckpoint("g", 1))
		t.Fatalf("after the restart the global store lacks %v of partition 1, which are still in the topic (store holds %d keys; partition 1 checkpoint %d)", missing, count(), ck)
	}
	// And nothing of partition 0 below its log start: 2 keys of it, 5 of partition 1.
	if n := count(); n != 7 {
		t.Fatalf("after the restart the global store holds %d keys, want 7", n)
	}
}

// TestGlobalStoreOfARecreatedTopicIsReadAgain: a global store's topic deleted and
// created anew. While the store runs, the new topic is behind the checkpoints; when the
// instance starts again, it may already hold more records than they count. Either way
// the checkpoints are offsets of the old topic: the store must be read again from the
// new topic's start (it used to wait until the new topic passed them and then read
// only the tail, on top of the old topic's keys).
func TestGlobalStoreOfARecreatedTopicIsReadAgain(t *testing.T) {
	kafkatest.ForEachCluster(t, testGlobalStoreOfARecreatedTopicIsReadAgain)
}

func testGlobalStoreOfARecreatedTopicIsReadAgain(t *testing.T, c *kafkatest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := c.Unique("glob")
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	// fill (re)creates the topic with n records of each partition, keys <gen>-p<p>-k<i>.
	fill := func(gen string, n int, recreate bool) {
		t.Helper()
		if recreate {
			if err := admin.DeleteTopic(topic); err != nil {
				t.Fatal(err)
			}
		}
		for c.CreateTopic(ctx, topic, 2, nil) != nil {
			if ctx.Err() != nil {
				t.Fatalf("create %s: %v", topic, ctx.Err())
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := client.RefreshMetadata(topic); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			for i := range n {
				m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("%s-p%d-k%d", gen, p, i)), Value: sarama.StringEncoder("v")}
				if err := c.ProduceToPartition(ctx, topic, p, m); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	be, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	gs := &graph.GlobalStore{Store: &graph.Store{Name: "g"}, Topic: topic,
		Entry: func(rec graph.RawRecord) ([]byte, []byte, bool, error) { return rec.Key, rec.Value, false, nil }}
	newState := func() *globalState {
		return &globalState{client: client, fail: func(error) {}, stores: []*graph.GlobalStore{gs}, backend: be,
			logger: slog.New(slog.DiscardHandler), next: map[string]map[int32]int64{}}
	}
	keys := func() []string {
		t.Helper()
		it, err := be.Iterate("g", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []string
		for it.Next() {
			out = append(out, string(it.Key()))
		}
		return out
	}
	want := func(gen string, n int) string {
		var out []string
		for p := range 2 {
			for i := range n {
				out = append(out, fmt.Sprintf("%s-p%d-k%d", gen, p, i))
			}
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}

	fill("one", 3, false)
	running := newState()
	if err := running.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys()); got != want("one", 3) {
		t.Fatalf("first read: %v", got)
	}
	// Recreated under the running store, with fewer records than its checkpoints.
	fill("two", 2, true)
	if err := running.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys()); got != want("two", 2) {
		t.Errorf("the running store after its topic was made anew holds %v, want %v", got, want("two", 2))
	}
	// Recreated while the instance is down, with more records than the checkpoints.
	fill("three", 5, true)
	if err := newState().catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys()); got != want("three", 5) {
		t.Errorf("the store after a restart on a topic made anew holds %v, want %v", got, want("three", 5))
	}
}
