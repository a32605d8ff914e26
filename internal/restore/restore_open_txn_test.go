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

// openTxnChangelog sets the scene of a task that moved twice while its first owner's
// transaction stayed open (issue 22): owner A committed k1=a, then stalled in a
// transaction holding k1=zombie; owner B committed k2=b behind it. The last stable
// offset stops at A's open record; B's commit lies above it. It returns the offset after
// A's commit (a store that held A's state would have that checkpoint), the high-water
// mark, and abort, which ends A's transaction.
func openTxnChangelog(t *testing.T, c *kafkatest.Cluster) (topic string, cpA, hwm int64, abort func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	topic = c.Unique("store-changelog")
	if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	newProducer := func(name string) *producer.Producer {
		p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique(name), TransactionTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	send := func(p *producer.Producer, k, v string) {
		if err := p.Send(ctx, topic, 0, []byte(k), []byte(v), nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	a, b := newProducer("owner-a"), newProducer("owner-b")
	send(a, "k1", "a")
	if err := a.Commit(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	last, _ := a.Offset(topic, 0)
	cpA = last + 1
	send(a, "k1", "zombie")
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	send(b, "k2", "b")
	if err := b.Commit(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, c)
	lso, err := kread.ListOffset(client, topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	if hwm, err = kread.HighWaterMark(client, topic, 0); err != nil {
		t.Fatal(err)
	}
	if lso != cpA+1 || hwm <= lso+1 { // A's commit marker at cpA, its open record at cpA+1
		t.Fatalf("scene: last stable offset %d, high-water mark %d: want A's open record at %d and B's commit above it", lso, hwm, cpA+1)
	}
	return topic, cpA, hwm, func() {
		if err := a.Abort(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

var afterB = map[string]string{"k1": "a", "k2": "b"}

// A restore behind another producer's open transaction waits for it to end and
// restores the commits behind it, from empty and from a checkpoint.
func TestRestoreWaitsForAnotherProducersOpenTxn(t *testing.T) {
	for _, fromCheckpoint := range []bool{false, true} {
		name := map[bool]string{false: "from-empty", true: "from-checkpoint"}[fromCheckpoint]
		t.Run(name, func(t *testing.T) {
			kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
				topic, cpA, hwm, abort := openTxnChangelog(t, c)
				backend := kvstore.NewMemoryBackend()
				if fromCheckpoint {
					if err := backend.Write(kvstore.Batch{
						Writes:      map[string][]kvstore.Entry{"s": {{Key: []byte("k1"), Value: []byte("a")}}},
						Checkpoints: map[string]int64{"s": cpA},
					}); err != nil {
						t.Fatal(err)
					}
				}
				const hold = 500 * time.Millisecond
				go func() {
					time.Sleep(hold)
					abort()
				}()
				began := time.Now()
				res, err := (&restore.Restorer{Client: newClient(t, c), StableWait: time.Minute}).Restore(context.Background(), backend, "s", topic, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := storeContent(t, backend, "s")
				cp, _, _ := backend.Checkpoint("s")
				if !maps.Equal(got, afterB) || cp < hwm || res.To < hwm {
					t.Errorf("restore behind an open transaction: store %v, checkpoint %d, restored to %d; want %v up to the high-water mark %d", got, cp, res.To, afterB, hwm)
				}
				if took := time.Since(began); took < hold {
					t.Errorf("restore took %v: it did not wait for the open transaction", took)
				}
			})
		})
	}
}

// An open transaction that outlives the restore's wait: the restore fails with
// ErrMarkersPending (the runtime retries) and leaves the store as it is.
func TestRestoreBehindAnOpenTxnPastItsWait(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		topic, cpA, _, abort := openTxnChangelog(t, c)
		defer abort()
		backend := kvstore.NewMemoryBackend()
		if err := backend.Write(kvstore.Batch{
			Writes:      map[string][]kvstore.Entry{"s": {{Key: []byte("k1"), Value: []byte("a")}}},
			Checkpoints: map[string]int64{"s": cpA},
		}); err != nil {
			t.Fatal(err)
		}
		_, err := (&restore.Restorer{Client: newClient(t, c), StableWait: 300 * time.Millisecond}).Restore(context.Background(), backend, "s", topic, 0)
		if !errors.Is(err, changelog.ErrRestore) || !errors.Is(err, changelog.ErrMarkersPending) || !errors.Is(err, kread.ErrTransactionOpen) {
			t.Fatalf("restore error %v; want ErrRestore, ErrMarkersPending and kread.ErrTransactionOpen", err)
		}
		got := storeContent(t, backend, "s")
		cp, _, _ := backend.Checkpoint("s")
		if !maps.Equal(got, map[string]string{"k1": "a"}) || cp != cpA {
			t.Errorf("a failed wait changed the store: %v, checkpoint %d→%d", got, cpA, cp)
		}
	})
}

// A store restored from its source topic up to the task's committed input offset does
// not wait for a transaction open above that offset: the task consumed up to it with
// read_committed, so nothing below it is undecided, and a user's producer holding a
// transaction open on the source topic must not hold the restore up.
func TestRestoreUntilDoesNotWaitForAnOpenTxnAboveIt(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		topic, cpA, _, abort := openTxnChangelog(t, c)
		defer abort()
		backend := kvstore.NewMemoryBackend()
		r := &restore.Restorer{Client: newClient(t, c), StableWait: time.Minute, Until: cpA, HasUntil: true}
		began := time.Now()
		if _, err := r.Restore(context.Background(), backend, "s", topic, 0); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("restore up to %d took %v: it waited for the transaction open above it", cpA, took)
		}
		if got := storeContent(t, backend, "s"); !maps.Equal(got, map[string]string{"k1": "a"}) {
			t.Errorf("store %v, want k1=a", got)
		}
	})
}
