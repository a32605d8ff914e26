package eddy

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// purger deletes records that no owner of a task reads again — a repartition topic's
// committed input, a window store's expired changelog — on a goroutine of its own.
//
// Tasks used to call DeleteRecords themselves after a commit, one request per task and
// topic, on their worker's goroutine. A worker of 64 tasks then stopped processing for
// 64 round trips every purge interval: measured on one Kafka 4.1.1 broker, 0.3–1.3 s
// per worker, and up to 8.5 s when the broker was busy writing transaction markers,
// which was the larger part of the 64-partition word count's run-to-run spread
// (BENCHMARKS.md). Now a task only asks (purge); the purger keeps the highest offset
// asked per partition and sends one DeleteRecords per topic (sarama splits it per
// leader), so a worker never waits for it, and N tasks cost one request, not N.
//
// The purger has a client of its own, made at its first request: Kafka answers the
// requests of one connection in order, and a DeleteRecords waits in the broker until
// the partition's log start moves, so on the group's connection it would hold up its
// fetches and heartbeats.
//
// Deleting later than asked is safe: the offsets are below input this instance
// committed, or below a window store's live segments, whoever owns the task by then.
// A failed request is retried after retryAfter with whatever was asked meanwhile; a
// topic whose cleanup.policy refuses deletion (compact only) is reported once and left
// alone; an offset past its partition's end (asked for a topic since deleted and
// created anew) is dropped, never retried: kept, it would mask the partition's later
// requests. What is pending when the runtime stops is dropped: the next owner asks again.
type purger struct {
	connect    func() (recordDeleter, error)
	logger     *slog.Logger
	retryAfter time.Duration

	mu      sync.Mutex
	pending map[string]*purgeTopic // topic → what to delete
	refused map[string]bool        // topics whose cleanup.policy refuses DeleteRecords
	wake    chan struct{}
}

// purgeTopic is what a topic has to delete: per partition, the offset to delete below.
type purgeTopic struct {
	below map[int32]int64
	store string // the window store whose changelog it is; "" for a repartition topic
}

// recordDeleter is what the purger needs of a sarama.ClusterAdmin.
type recordDeleter interface {
	DeleteRecords(topic string, below map[int32]int64) error
	Close() error
}

func newPurger(connect func() (recordDeleter, error), retryAfter time.Duration, logger *slog.Logger) *purger {
	return &purger{connect: connect, logger: logger, retryAfter: retryAfter, pending: map[string]*purgeTopic{}, refused: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// purge asks for the records of a partition below an offset to be deleted; store names
// the window store whose changelog the topic is ("" for a repartition topic). It never
// blocks.
func (p *purger) purge(topic string, partition int32, below int64, store string) {
	p.mu.Lock()
	if p.refused[topic] {
		p.mu.Unlock()
		return
	}
	p.add(topic, store, map[int32]int64{partition: below})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// add merges offsets into the pending ones, keeping the higher; p.mu is held.
func (p *purger) add(topic, store string, below map[int32]int64) {
	pt := p.pending[topic]
	if pt == nil {
		pt = &purgeTopic{below: map[int32]int64{}, store: store}
		p.pending[topic] = pt
	}
	for part, off := range below {
		pt.below[part] = max(pt.below[part], off)
	}
}

// run deletes what is asked until ctx ends.
func (p *purger) run(ctx context.Context) {
	var del recordDeleter
	defer func() {
		if del != nil {
			_ = del.Close()
		}
	}()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry:
		}
		retry = nil
		if del == nil {
			var err error
			if del, err = p.connect(); err != nil {
				p.logger.Warn("could not connect to delete the records tasks no longer need; retrying later", "error", err)
				retry = time.After(p.retryAfter)
				continue
			}
		}
		if p.deletePending(ctx, del) {
			retry = time.After(p.retryAfter)
		}
	}
}

// deletePending sends one DeleteRecords per topic with pending offsets, and reports
// whether any failed (and is pending again).
func (p *purger) deletePending(ctx context.Context, del recordDeleter) (failed bool) {
	p.mu.Lock()
	batch := p.pending
	p.pending = map[string]*purgeTopic{}
	p.mu.Unlock()
	for _, topic := range slices.Sorted(maps.Keys(batch)) {
		if ctx.Err() != nil {
			return false
		}
		pt := batch[topic]
		err := del.DeleteRecords(topic, pt.below)
		switch {
		case err == nil:
			p.logger.Debug("deleted records", "topic", topic, "below", pt.below)
		case errors.Is(err, sarama.ErrPolicyViolation):
			// The topic's cleanup.policy is compact alone (a window store's changelog
			// made before eddy trimmed them, or by hand): Kafka refuses DeleteRecords
			// on it. Say so once and stop trying.
			p.mu.Lock()
			p.refused[topic] = true
			delete(p.pending, topic)
			p.mu.Unlock()
			p.logger.Warn("cannot trim a window store's changelog: its cleanup.policy lacks delete; set cleanup.policy=compact,delete (with retention.ms=-1 and retention.bytes=-1, so nothing is deleted by time or size) to let eddy delete its expired windows", "store", pt.store, "topic", topic, "error", err)
		case errors.Is(err, sarama.ErrOffsetOutOfRange):
			// An offset above its partition's high-water mark: the topic was
			// deleted and created anew since it was asked. Retried, it would fail for
			// ever, and kept as the partition's largest offset it would mask every
			// later request for the partition, valid ones too. sarama's error does not
			// say which partition: ask for each alone.
			failed = p.deleteEach(del, topic, pt) || failed
		default:
			what := "could not delete committed records of a repartition topic; retrying later"
			if pt.store != "" {
				what = "could not delete the expired records of a window store's changelog; retrying later"
			}
			p.logger.Warn(what, "store", pt.store, "topic", topic, "below", pt.below, "error", err)
			p.mu.Lock()
			p.add(topic, pt.store, pt.below)
			p.mu.Unlock()
			failed = true
		}
	}
	return failed
}

// deleteEach sends one DeleteRecords per partition of pt, after a request for several
// failed with an offset out of range: a partition whose offset is above its end is
// dropped with a warning (its tasks ask again with offsets of the new topic), one that
// fails otherwise is pending again. It reports whether any is pending again.
func (p *purger) deleteEach(del recordDeleter, topic string, pt *purgeTopic) (failed bool) {
	for _, part := range slices.Sorted(maps.Keys(pt.below)) {
		below := map[int32]int64{part: pt.below[part]}
		err := del.DeleteRecords(topic, below)
		switch {
		case err == nil:
			p.logger.Debug("deleted records", "topic", topic, "below", below)
		case errors.Is(err, sarama.ErrOffsetOutOfRange):
			p.logger.Warn("not deleting records below an offset past the partition's end: the topic was deleted and created anew since the offset was asked; dropping it",
				"store", pt.store, "topic", topic, "partition", part, "below", pt.below[part], "error", err)
		default:
			p.logger.Warn("could not delete records; retrying later", "store", pt.store, "topic", topic, "partition", part, "below", pt.below[part], "error", err)
			p.mu.Lock()
			p.add(topic, pt.store, below)
			p.mu.Unlock()
			failed = true
		}
	}
	return failed
}
