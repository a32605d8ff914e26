//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
)

// The pipes: what a plain sarama program copying one topic to another achieves on the
// same broker, with the same client defaults as eddy. They are ceilings, not
// applications: they do not handle rebalances or fencing beyond what sarama does.

// srcPos is where a piped record came from.
type srcPos struct {
	partition int32
	offset    int64
}

// runPipeRaw copies spec.Input to spec.Output (same partition) with a consumer group and
// one idempotent async producer, marking a record's offset once its copy is
// acknowledged (at-least-once); sarama auto-commits the marks every spec.CommitInterval.
func runPipeRaw(ctx context.Context, spec *childSpec, reg metrics.Registry) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	pc := saramaBase(spec, reg, spec.Group+"-producer")
	pc.Producer.Idempotent = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Net.MaxOpenRequests = 1
	pc.Producer.Return.Successes = true
	pc.Producer.Return.Errors = true
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewAsyncProducer(spec.Brokers, pc)
	if err != nil {
		return fmt.Errorf("pipe-raw producer: %w", err)
	}

	cc := saramaBase(spec, reg, spec.Group)
	cc.Consumer.Offsets.AutoCommit.Enable = true
	cc.Consumer.Offsets.AutoCommit.Interval = spec.CommitInterval
	group, err := sarama.NewConsumerGroup(spec.Brokers, spec.Group, cc)
	if err != nil {
		_ = prod.Close()
		return fmt.Errorf("pipe-raw consumer group: %w", err)
	}

	h := &rawHandler{out: spec.Output, prod: prod}
	var wg sync.WaitGroup
	wg.Go(func() {
		for m := range prod.Successes() {
			pos, ok := m.Metadata.(srcPos)
			if s := h.sess.Load(); ok && s != nil {
				(*s).MarkOffset(spec.Input, pos.partition, pos.offset+1, "")
			}
		}
	})
	wg.Go(func() {
		for e := range prod.Errors() {
			cancel(fmt.Errorf("pipe-raw produce: %w", e))
		}
	})
	wg.Go(func() {
		for e := range group.Errors() {
			logger.Warn("consumer group", "error", e)
		}
	})
	err = consumeLoop(ctx, group, spec.Input, h)
	err = errors.Join(err, group.Close(), prod.Close())
	wg.Wait()
	return errors.Join(err, causeOf(ctx))
}

// causeOf returns why ctx ended unless it ended normally (the parent's SIGTERM).
func causeOf(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return nil
}

// consumeLoop runs the group's sessions until ctx ends.
func consumeLoop(ctx context.Context, group sarama.ConsumerGroup, topic string, h sarama.ConsumerGroupHandler) error {
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{topic}, h); err != nil {
			if ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return nil
			}
			return fmt.Errorf("consume %s: %w", topic, err)
		}
	}
	return nil
}

type rawHandler struct {
	out  string
	prod sarama.AsyncProducer
	sess atomic.Pointer[sarama.ConsumerGroupSession]
}

func (h *rawHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.sess.Store(&s)
	return nil
}

func (h *rawHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *rawHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	done := sess.Context().Done()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			pm := &sarama.ProducerMessage{
				Topic: h.out, Partition: msg.Partition, Timestamp: msg.Timestamp,
				Key: sarama.ByteEncoder(msg.Key), Value: sarama.ByteEncoder(msg.Value),
				Metadata: srcPos{msg.Partition, msg.Offset},
			}
			select {
			case h.prod.Input() <- pm:
			case <-done:
				return nil
			}
		case <-done:
			return nil
		}
	}
}

// txnConfig is the configuration of a pipe's transactional producer: what eddy's
// txproducer sets, except that acknowledgements are not returned (a pipe needs none).
func txnConfig(spec *childSpec, reg metrics.Registry, txnID string) *sarama.Config {
	c := saramaBase(spec, reg, txnID)
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = false
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max = max(c.Producer.Retry.Max, 10)
	c.Producer.Transaction.ID = txnID
	c.Producer.Transaction.Timeout = 10 * time.Second
	c.Producer.Transaction.Retry.Max = max(c.Producer.Transaction.Retry.Max, 50)
	return c
}

// runPipeTxn copies spec.Input to spec.Output in transactions that also commit the
// consumed offsets, every spec.CommitInterval: one transactional producer per claimed
// partition (as eddy has one per task), or one for all (spec.SingleProducer).
func runPipeTxn(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cc := saramaBase(spec, reg, spec.Group)
	cc.Consumer.Offsets.AutoCommit.Enable = false
	group, err := sarama.NewConsumerGroup(spec.Brokers, spec.Group, cc)
	if err != nil {
		return fmt.Errorf("pipe-txn consumer group: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range group.Errors() {
			logger.Warn("consumer group", "error", e)
		}
	})
	h := &txnHandler{spec: spec, reg: reg, fail: func(err error) { cancel(err) }, commits: &durationStats{}}
	defer h.commits.fill(res)
	stopCommitter := func() {}
	if spec.SingleProducer {
		single, err := newSingleTxn(spec, reg, h.fail, h.commits)
		if err != nil {
			_ = group.Close()
			wg.Wait()
			return err
		}
		h.single = single
		stop := make(chan struct{})
		committerDone := make(chan struct{})
		go func() {
			defer close(committerDone)
			single.commitLoop(stop)
		}()
		stopCommitter = func() {
			close(stop)
			<-committerDone
		}
	}
	err = consumeLoop(ctx, group, spec.Input, h)
	err = errors.Join(err, group.Close())
	wg.Wait()
	stopCommitter()
	if h.single != nil {
		err = errors.Join(err, h.single.close())
	}
	return errors.Join(err, causeOf(ctx))
}

type txnHandler struct {
	spec    *childSpec
	reg     metrics.Registry
	fail    func(error)
	single  *singleTxn
	commits *durationStats // how long each AddOffsetsToTxn + CommitTxn took
}

func (h *txnHandler) Setup(s sarama.ConsumerGroupSession) error {
	if h.single != nil {
		h.single.setSession(s)
	}
	return nil
}

// Cleanup commits the single producer's open transaction while the session (whose
// generation the offsets carry) is still valid.
func (h *txnHandler) Cleanup(sarama.ConsumerGroupSession) error {
	if h.single != nil {
		return h.failed(h.single.commit())
	}
	return nil
}

func (h *txnHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	if h.single != nil {
		return h.single.consume(sess, claim)
	}
	spec, p := h.spec, claim.Partition()
	prod, err := sarama.NewAsyncProducer(spec.Brokers, txnConfig(spec, h.reg, fmt.Sprintf("%s-%d", spec.Group, p)))
	if err != nil {
		h.fail(fmt.Errorf("pipe-txn producer %d: %w", p, err))
		return err
	}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for e := range prod.Errors() {
			h.fail(fmt.Errorf("pipe-txn produce: %w", e))
		}
	}()
	defer func() {
		_ = prod.Close()
		<-errsDone
	}()
	inTxn, next := false, int64(-1)
	commit := func() error {
		if !inTxn {
			return nil
		}
		began := time.Now()
		defer func() { h.commits.add(time.Since(began)) }()
		offsets := map[string][]*sarama.PartitionOffsetMetadata{
			claim.Topic(): {{Partition: p, Offset: next, LeaderEpoch: -1}},
		}
		if err := prod.AddOffsetsToTxnWithGroupMetadata(offsets, sarama.NewConsumerGroupMetadataFromSession(sess, spec.Group, nil)); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
		if err := prod.CommitTxn(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		inTxn = false
		return nil
	}
	tick := time.NewTicker(spec.CommitInterval)
	defer tick.Stop()
	done := sess.Context().Done()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return h.failed(commit())
			}
			if !inTxn {
				if err := prod.BeginTxn(); err != nil {
					return h.failed(fmt.Errorf("begin: %w", err))
				}
				inTxn = true
			}
			prod.Input() <- &sarama.ProducerMessage{
				Topic: spec.Output, Partition: p, Timestamp: msg.Timestamp,
				Key: sarama.ByteEncoder(msg.Key), Value: sarama.ByteEncoder(msg.Value),
			}
			next = msg.Offset + 1
		case <-tick.C:
			if err := commit(); err != nil {
				return h.failed(err)
			}
		case <-done:
			return h.failed(commit())
		}
	}
}

func (h *txnHandler) failed(err error) error {
	if err != nil {
		h.fail(err)
	}
	return err
}

// singleTxn is the pipe-txn-1p variant: one transactional producer for all partitions;
// claims send under a lock that the committer takes every interval.
type singleTxn struct {
	spec *childSpec
	prod sarama.AsyncProducer
	fail func(error)

	mu      sync.Mutex
	sess    sarama.ConsumerGroupSession
	inTxn   bool
	offsets map[int32]int64
	topic   string

	errsDone chan struct{}
	commits  *durationStats
}

func newSingleTxn(spec *childSpec, reg metrics.Registry, fail func(error), commits *durationStats) (*singleTxn, error) {
	prod, err := sarama.NewAsyncProducer(spec.Brokers, txnConfig(spec, reg, spec.Group+"-single"))
	if err != nil {
		return nil, fmt.Errorf("pipe-txn-1p producer: %w", err)
	}
	s := &singleTxn{spec: spec, prod: prod, fail: fail, offsets: map[int32]int64{}, errsDone: make(chan struct{}), commits: commits}
	go func() {
		defer close(s.errsDone)
		for e := range prod.Errors() {
			fail(fmt.Errorf("pipe-txn-1p produce: %w", e))
		}
	}()
	return s, nil
}

func (s *singleTxn) setSession(sess sarama.ConsumerGroupSession) {
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
}

func (s *singleTxn) consume(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	done := sess.Context().Done()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.mu.Lock()
			if !s.inTxn {
				if err := s.prod.BeginTxn(); err != nil {
					s.mu.Unlock()
					s.fail(fmt.Errorf("begin: %w", err))
					return err
				}
				s.inTxn = true
			}
			s.prod.Input() <- &sarama.ProducerMessage{
				Topic: s.spec.Output, Partition: msg.Partition, Timestamp: msg.Timestamp,
				Key: sarama.ByteEncoder(msg.Key), Value: sarama.ByteEncoder(msg.Value),
			}
			s.offsets[msg.Partition] = msg.Offset + 1
			s.topic = msg.Topic
			s.mu.Unlock()
		case <-done:
			return nil
		}
	}
}

func (s *singleTxn) commitLoop(stop <-chan struct{}) {
	tick := time.NewTicker(s.spec.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := s.commit(); err != nil {
				s.fail(err)
				return
			}
		}
	}
}

func (s *singleTxn) commit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inTxn {
		return nil
	}
	began := time.Now()
	defer func() { s.commits.add(time.Since(began)) }()
	var parts []*sarama.PartitionOffsetMetadata
	for p, off := range s.offsets {
		parts = append(parts, &sarama.PartitionOffsetMetadata{Partition: p, Offset: off, LeaderEpoch: -1})
	}
	if err := s.prod.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{s.topic: parts},
		sarama.NewConsumerGroupMetadataFromSession(s.sess, s.spec.Group, nil)); err != nil {
		return fmt.Errorf("add offsets: %w", err)
	}
	if err := s.prod.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.inTxn = false
	clear(s.offsets)
	return nil
}

func (s *singleTxn) close() error {
	err := s.prod.Close()
	<-s.errsDone
	return err
}

// runPipeTxn2Hop runs two transactional pipes in one process, spec.Input → <group>-mid
// → spec.Output, each with its own group and one producer per partition: the ceiling of
// a topology with one repartition hop (the word count moves every word through Kafka
// twice).
func runPipeTxn2Hop(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult) error {
	first, second := *spec, *spec
	first.Group, first.Output = spec.Group+"-a", spec.Group+"-mid"
	second.Group, second.Input = spec.Group+"-b", spec.Group+"-mid"
	var r1, r2 childResult
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Go(func() { err1 = runPipeTxn(ctx, &first, reg, &r1) })
	wg.Go(func() { err2 = runPipeTxn(ctx, &second, reg, &r2) })
	wg.Wait()
	// Both hops' commits, their mean weighted by count.
	res.Commits = r1.Commits + r2.Commits
	if res.Commits > 0 {
		res.CommitMeanMs = (r1.CommitMeanMs*float64(r1.Commits) + r2.CommitMeanMs*float64(r2.Commits)) / float64(res.Commits)
		res.CommitP50Ms, res.CommitP99Ms = max(r1.CommitP50Ms, r2.CommitP50Ms), max(r1.CommitP99Ms, r2.CommitP99Ms)
		res.CommitTotalSec = r1.CommitTotalSec + r2.CommitTotalSec
	}
	return errors.Join(err1, err2)
}
