package producer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/txproducer"
)

// A creation that outlives its context goes on; the next Create takes its producer
// instead of racing it with a second InitProducerId. (Two racing creations: the
// coordinator answers the older one last, and that bumps the epoch past the producer the
// task went on with, which is fenced at its first commit.)
func TestCreatorRunsOneCreationAtATime(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, id := c.Unique("out"), c.Unique("txn")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	var inits, slept atomic.Int32
	k := b.Kfake()
	k.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.InitProducerIDRequest)
		if r.TransactionalID == nil || *r.TransactionalID != id {
			return nil, nil, false
		}
		inits.Add(1)
		if slept.Add(1) == 1 { // the first creation is slow
			k.SleepControl(func() { time.Sleep(2 * time.Second) })
		}
		return nil, nil, false
	})
	cr := producer.NewCreator(producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: id})
	defer cr.Close()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := cr.Create(short)
	cancelShort()
	if producer.Classify(err, 0) != txproducer.Indefinite {
		t.Fatalf("a creation that outlived its context: %v, want an Indefinite error", err)
	}
	p, err := cr.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if n := inits.Load(); n != 1 {
		t.Errorf("InitProducerId sent %d times for two Creates, want 1 (the second waits for the first)", n)
	}
	if err := p.Send(ctx, topic, 0, []byte("k"), []byte("v"), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx, nil, nil); err != nil {
		t.Fatalf("commit of the producer Create returned: %v", err)
	}
	msgs, err := c.ReadCommitted(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Errorf("read_committed sees %d records, want 1", len(msgs))
	}
}

// A commit whose EndTxn does not complete within the context returns when the context
// ends, as an Indefinite error (outcome unknown), and the producer refuses later calls.
// sarama alone would retry EndTxn 50 times. A new producer settles the transaction.
func TestCommitIsBoundedByItsContext(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, id := c.Unique("out"), c.Unique("txn")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	cfg := producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: id}
	cfg.Sarama.Producer.Transaction.Retry.Backoff = 200 * time.Millisecond // 50 retries: 10 s
	p, err := producer.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Send(ctx, topic, 0, []byte("k"), []byte("v"), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Every EndTxn of this producer's epoch is refused (its retries go on in the
	// background after the context ends, and must never commit).
	refusedEpoch := int32(-1)
	k := b.Kfake()
	k.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if r.TransactionalID != id {
			return nil, nil, false
		}
		if refusedEpoch < 0 {
			refusedEpoch = int32(r.ProducerEpoch)
		}
		if int32(r.ProducerEpoch) != refusedEpoch {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	opCtx, cancelOp := context.WithTimeout(ctx, 500*time.Millisecond)
	began := time.Now()
	err = p.Commit(opCtx, nil, nil)
	cancelOp()
	took := time.Since(began)
	if producer.Classify(err, 0) != txproducer.Indefinite || took > 3*time.Second {
		t.Fatalf("commit with EndTxn refused: %v after %v; want an Indefinite error at the context's end (500 ms)", err, took)
	}
	if err := p.Send(ctx, topic, 0, []byte("k"), []byte("after"), nil, time.Now()); producer.Classify(err, 0) != txproducer.Indefinite {
		t.Errorf("send after a commit of unknown outcome: %v, want Indefinite", err)
	}
	if err := p.Abort(ctx); producer.Classify(err, 0) != txproducer.Indefinite {
		t.Errorf("abort after a commit of unknown outcome: %v, want Indefinite", err)
	}
	_ = p.Close()
	second, err := producer.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := c.WaitStable(ctx, topic); err != nil {
		t.Fatalf("the new producer did not settle the transaction: %v", err)
	}
	if msgs, err := c.ReadCommitted(ctx, topic); err != nil || len(msgs) != 0 {
		t.Errorf("read_committed after the settled transaction: %d records, %v; want none (never committed)", len(msgs), err)
	}
}
