package restore_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/kafkatest"
)

// pendingMarkers sets the scene of a task whose last commit's EndTxn has answered while
// the commit markers are not written yet (real Kafka writes them after EndTxn answers):
// transaction 1 (k1=a, k2=a) is committed; transaction 2 (k1=b, k3=b) is acknowledged and
// still open, playing the part of the pending markers. The store holds both, with the
// checkpoint the runtime writes after a commit (last changelog offset + 1), which is above
// the last stable offset. commit writes the markers.
func pendingMarkers(t *testing.T) (c *kafkatest.Cluster, topic string, backend kvstore.Backend, cp int64, commit func()) {
	t.Helper()
	c = kafkatest.Embedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	topic = c.Unique("store-changelog")
	if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("txn")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	send := func(k, v string) {
		if err := p.Send(ctx, topic, 0, []byte(k), []byte(v), nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	send("k1", "a")
	send("k2", "a")
	if err := p.Commit(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	send("k1", "b")
	send("k3", "b")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last, _ := p.Offset(topic, 0)
	cp = last + 1
	backend = kvstore.NewMemoryBackend()
	if err := backend.Write(kvstore.Batch{
		Writes:      map[string][]kvstore.Entry{"s": {{Key: []byte("k1"), Value: []byte("b")}, {Key: []byte("k2"), Value: []byte("a")}, {Key: []byte("k3"), Value: []byte("b")}}},
		Checkpoints: map[string]int64{"s": cp},
	}); err != nil {
		t.Fatal(err)
	}
	commit = func() {
		if err := p.Commit(ctx, nil, nil); err != nil {
			t.Error(err)
		}
	}
	return c, topic, backend, cp, commit
}

func newClient(t *testing.T, c *kafkatest.Cluster) sarama.Client {
	t.Helper()
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

var afterBoth = map[string]string{"k1": "b", "k2": "a", "k3": "b"}

// A restore whose checkpoint is above the last stable offset because the store's own
// commit markers are pending waits for them; it must not take the checkpoint for a
// recreated topic, wipe the store and restore up to the stale end offset (which lost
// the last commit for good: the next flush wrote a checkpoint past the gap).
func TestRestoreWaitsForPendingMarkers(t *testing.T) {
	c, topic, backend, cp, commit := pendingMarkers(t)
	ctx := context.Background()
	landed := make(chan struct{})
	go func() {
		defer close(landed)
		time.Sleep(300 * time.Millisecond)
		commit()
	}()
	res, err := (&restore.Restorer{Client: newClient(t, c)}).Restore(ctx, backend, "s", topic, 0)
	<-landed
	if err != nil {
		t.Fatal(err)
	}
	got := storeContent(t, backend, "s")
	after, _, _ := backend.Checkpoint("s")
	t.Logf("checkpoint before %d, restore %+v, store after %v, checkpoint after %d", cp, res, got, after)
	if res.Wiped || !maps.Equal(got, afterBoth) || after < cp {
		t.Errorf("restore with the store's own markers pending: wiped=%v store=%v checkpoint %d→%d; want the store kept: %v", res.Wiped, got, cp, after, afterBoth)
	}
}

// Markers that do not come within the restore's wait for the transactions open on the
// changelog (StableWait): the restore fails with ErrMarkersPending (the runtime retries)
// and leaves the store as it is.
func TestRestoreMarkersThatDoNotComeLeaveTheStore(t *testing.T) {
	c, topic, backend, cp, commit := pendingMarkers(t)
	defer commit()
	r := &restore.Restorer{Client: newClient(t, c), StableWait: 400 * time.Millisecond}
	res, err := r.Restore(context.Background(), backend, "s", topic, 0)
	if !errors.Is(err, changelog.ErrMarkersPending) || !errors.Is(err, changelog.ErrRestore) || !errors.Is(err, kread.ErrTransactionOpen) {
		t.Fatalf("restore error = %v; want ErrMarkersPending and kread.ErrTransactionOpen", err)
	}
	got := storeContent(t, backend, "s")
	after, _, _ := backend.Checkpoint("s")
	if res.Wiped || !maps.Equal(got, afterBoth) || after != cp {
		t.Errorf("a failed wait changed the store: wiped=%v store=%v checkpoint %d→%d", res.Wiped, got, cp, after)
	}
}

// A checkpoint above the high-water mark cannot come from this changelog (the topic was
// recreated): the store is wiped and restored from the changelog.
func TestRestoreCheckpointAboveHighWaterMarkWipes(t *testing.T) {
	c, topic, backend, cp, commit := pendingMarkers(t)
	commit()
	if err := backend.Write(kvstore.Batch{
		Writes:      map[string][]kvstore.Entry{"s": {{Key: []byte("stale"), Value: []byte("x")}}},
		Checkpoints: map[string]int64{"s": cp + 100},
	}); err != nil {
		t.Fatal(err)
	}
	res, err := (&restore.Restorer{Client: newClient(t, c)}).Restore(context.Background(), backend, "s", topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := storeContent(t, backend, "s"); !res.Wiped || !maps.Equal(got, afterBoth) {
		t.Errorf("checkpoint above the high-water mark: wiped=%v store=%v; want wiped and %v", res.Wiped, got, afterBoth)
	}
}
