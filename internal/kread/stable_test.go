package kread_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
)

// stableScene is one partition of a fresh topic with a committed record (offset 0), an
// open transaction of a stalled producer (offset 1), and a record committed behind it
// by another producer: the last stable offset stops at 1, the high-water mark is past
// the committed record. abort ends the open transaction.
type stableScene struct {
	c       *kafkatest.Cluster
	client  sarama.Client
	topic   string
	stalled *producer.Producer
}

func newStableScene(t *testing.T, c *kafkatest.Cluster) *stableScene {
	t.Helper()
	ctx := testCtx(t)
	s := &stableScene{c: c, topic: c.Unique("stable")}
	if err := c.CreateTopic(ctx, s.topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.client, err = sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.Close() })
	s.produce(t, "committed-before")
	s.stalled = s.openTxn(t, "stalled", "open")
	s.produce(t, "committed-behind")
	return s
}

// openTxn begins a transaction of a new producer with transactional ID name, writes
// value in it and leaves it open (a transaction timeout of a minute: only the test
// ends it).
func (s *stableScene) openTxn(t *testing.T, name, value string) *producer.Producer {
	t.Helper()
	ctx := testCtx(t)
	p, err := producer.New(ctx, producer.Config{Brokers: s.c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: s.c.Unique(name), TransactionTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.Send(ctx, s.topic, 0, []byte("k"), []byte(value), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *stableScene) produce(t *testing.T, value string) {
	t.Helper()
	if err := s.c.ProduceToPartition(testCtx(t), s.topic, 0, &sarama.ProducerMessage{Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(value)}); err != nil {
		t.Fatal(err)
	}
}

func (s *stableScene) offsets(t *testing.T) (lso, hwm int64) {
	t.Helper()
	lso, err := kread.ListOffset(s.client, s.topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	if hwm, err = kread.HighWaterMark(s.client, s.topic, 0); err != nil {
		t.Fatal(err)
	}
	return lso, hwm
}

// values reads the committed values in [0, end).
func (s *stableScene) values(t *testing.T, end int64) []string {
	t.Helper()
	var got []string
	if err := kread.ReadRange(testCtx(t), s.client, s.topic, 0, 0, end, func(r kread.Record) error {
		got = append(got, string(r.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// With no transaction open, StableOffsets answers at once what EndOffsets answers.
func TestStableOffsetsNoOpenTransaction(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		s := newStableScene(t, c)
		if err := s.stalled.Abort(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitStable(testCtx(t), s.topic); err != nil {
			t.Fatal(err)
		}
		waits := 0
		began := time.Now()
		start, end, err := kread.StableOffsets(testCtx(t), s.client, s.topic, 0, time.Minute, func(int64, int64) { waits++ })
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		wantStart, wantEnd, err := kread.EndOffsets(s.client, s.topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if start != wantStart || end != wantEnd || waits != 0 {
			t.Errorf("StableOffsets = %d, %d (waited %d times), want %d, %d and no wait", start, end, waits, wantStart, wantEnd)
		}
		if took > 5*time.Second {
			t.Errorf("StableOffsets took %v with no transaction open", took)
		}
	})
}

// A record committed behind another producer's open transaction lies above the last
// stable offset: StableOffsets waits until the transaction ends and returns an end past
// that record.
func TestStableOffsetsWaitsForAnOpenTransaction(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		s := newStableScene(t, c)
		lso, hwm := s.offsets(t)
		if lso != 1 || hwm <= 2 {
			t.Fatalf("scene: last stable offset %d, high-water mark %d; want 1 and above 2", lso, hwm)
		}
		if got := s.values(t, lso); len(got) != 1 {
			t.Fatalf("scene: below the last stable offset %v, want only the record before the open transaction", got)
		}
		const hold = 700 * time.Millisecond
		var aborted atomic.Bool
		go func() {
			time.Sleep(hold)
			aborted.Store(true)
			_ = s.stalled.Abort(context.Background())
		}()
		var waits []int64
		began := time.Now()
		_, end, err := kread.StableOffsets(testCtx(t), s.client, s.topic, 0, time.Minute, func(l, h int64) { waits = append(waits, l, h) })
		if err != nil {
			t.Fatal(err)
		}
		if !aborted.Load() || time.Since(began) < hold {
			t.Errorf("StableOffsets returned after %v, before the open transaction ended", time.Since(began))
		}
		if len(waits) != 2 || waits[0] != lso || waits[1] != hwm {
			t.Errorf("onWait calls %v, want one with (%d, %d)", waits, lso, hwm)
		}
		if end < hwm {
			t.Errorf("end %d below the high-water mark %d read before the wait", end, hwm)
		}
		if got := strings.Join(s.values(t, end), ","); got != "committed-before,committed-behind" {
			t.Errorf("committed records below the end: %s, want committed-before,committed-behind", got)
		}
	})
}

// A transaction begun after the call does not prolong the wait: only those open at the
// call are waited for, so a partition written by transactions without pause still has
// an end.
func TestStableOffsetsDoesNotWaitForLaterTransactions(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		s := newStableScene(t, c)
		_, hwm := s.offsets(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(300 * time.Millisecond)
			s.openTxn(t, "later", "later-open") // begins while the wait is on
			_ = s.stalled.Abort(context.Background())
		}()
		_, end, err := kread.StableOffsets(testCtx(t), s.client, s.topic, 0, 20*time.Second, nil)
		<-done
		if err != nil {
			t.Fatalf("StableOffsets waited for a transaction begun after it was called: %v", err)
		}
		// The later transaction's first record is at the high-water mark read at the
		// call; the stalled one's abort marker follows it.
		if end != hwm {
			t.Errorf("end %d, want %d: the first record of the later transaction", end, hwm)
		}
	})
}

// A transaction that outlives the bound: StableOffsets returns the last stable offset
// with an error that names the partition and both offsets.
func TestStableOffsetsBound(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		s := newStableScene(t, c)
		lso, hwm := s.offsets(t)
		const bound = 400 * time.Millisecond
		began := time.Now()
		start, end, err := kread.StableOffsets(testCtx(t), s.client, s.topic, 0, bound, nil)
		took := time.Since(began)
		if !errors.Is(err, kread.ErrTransactionOpen) {
			t.Fatalf("error %v, want one wrapping ErrTransactionOpen", err)
		}
		for _, want := range []string{s.topic + "/0", "last stable offset 1", "high-water mark " + strconv.FormatInt(hwm, 10)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		if start != 0 || end != lso {
			t.Errorf("offsets %d, %d with the error, want 0 and the last stable offset %d", start, end, lso)
		}
		if took < bound || took > bound+5*time.Second {
			t.Errorf("gave up after %v, want about %v", took, bound)
		}
	})
}
