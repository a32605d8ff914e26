package eddy

import (
	"context"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/producer"
)

// commitFunc is the step of a commit that makes it durable: under exactly-once the
// Kafka transaction's commit with the consumed offsets, under at-least-once a flush and
// the offsets marked in the group session. Fault-injection tests wrap it (App.commitSeam)
// when the transaction is made, so the commit path has no test branches.
type commitFunc func(ctx context.Context, offsets map[string]map[int32]int64) error

// transaction is the producer side of a task's units of work, in the spirit of
// franz-go's GroupTransactSession: it owns the producer (made by the creator, one
// creation at a time; recreating it fences its predecessors and settles their open
// transaction), knows the group session it commits in, and knows whether the commit
// under way committed (the nonce of its offsets record). It holds nothing of a task's
// own: the task prepares its part of a commit (output already sent, changelog records,
// offsets record) and finishes it after (stores, committed offsets), so one transaction
// can serve several tasks.
type transaction struct {
	id          string // the transactional ID; empty under at-least-once
	creator     *producer.Creator
	producer    *producer.Producer
	exactlyOnce bool
	groupID     string
	sess        sarama.ConsumerGroupSession
	// generation is the group generation the commit under way carries in its
	// TxnOffsetCommit, with sess's member ID: the one the worker entered the commit
	// with (taskHost.enterCommit), not necessarily sess's current one.
	generation int32
	// nonce names the offsets record of the commit under way (0: none), to tell after an
	// unknown outcome whether it committed.
	nonce  uint64
	commit commitFunc
	// holding: a commit is under way on the worker's committer goroutine (an
	// overlapped commit), and output records wait in held (heldBytes of keys and
	// values) until it has answered; the worker goroutine alone uses these three.
	holding   bool
	held      []heldRecord
	heldBytes int
}

// heldRecord is an output record of the transaction after the one committing, held
// until that commit has answered (transaction.sendOutput).
type heldRecord struct {
	ctx        context.Context
	limit      int
	origin     *producer.Origin
	topic      string
	partition  int32
	key, value []byte
	headers    []sarama.RecordHeader
	ts         time.Time
}

// sendOutput sends an output record of a task (producer.SendWithin), or holds it while
// a commit is under way: it belongs to the next transaction, which begins once that
// commit has answered (release).
func (x *transaction) sendOutput(ctx context.Context, limit int, origin *producer.Origin, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader, ts time.Time) error {
	if x.holding {
		x.held = append(x.held, heldRecord{ctx: ctx, limit: limit, origin: origin, topic: topic, partition: partition, key: key, value: value, headers: headers, ts: ts})
		x.heldBytes += len(key) + len(value)
		return nil
	}
	return x.producer.SendWithin(ctx, limit, origin, topic, partition, key, value, headers, ts)
}

// release sends the held records, in the order they were held, into a new transaction:
// the commit they waited for has committed.
func (x *transaction) release() error {
	held := x.held
	x.holding, x.held, x.heldBytes = false, nil, 0
	defer clear(held)
	for _, r := range held {
		if err := x.producer.SendWithin(r.ctx, r.limit, r.origin, r.topic, r.partition, r.key, r.value, r.headers, r.ts); err != nil {
			return err
		}
	}
	return nil
}

// dropHeld drops the held records: the transaction they belong to rolls back (its
// input is processed again).
func (x *transaction) dropHeld() {
	clear(x.held)
	x.holding, x.held, x.heldBytes = false, x.held[:0], 0
}

func newTransaction(cfg producer.Config, groupID string) *transaction {
	x := &transaction{id: cfg.TransactionalID, creator: producer.NewCreator(cfg), exactlyOnce: cfg.TransactionalID != "", groupID: groupID}
	x.commit = x.commitOffsets
	return x
}

// commitNonce returns the nonce of the commit under way, drawing one for a new commit.
// Every offsets record of the transaction carries it.
func (x *transaction) commitNonce() uint64 {
	if x.nonce == 0 {
		x.nonce = rand.Uint64() | 1
	}
	return x.nonce
}

// ensure creates the producer if there is none.
func (x *transaction) ensure(ctx context.Context) error {
	if x.producer != nil {
		return nil
	}
	p, err := x.creator.Create(ctx)
	if err != nil {
		return err
	}
	x.producer = p
	return nil
}

// lacksProducer reports an exactly-once transaction whose producer was dropped: its
// task must be recreated rather than resumed.
func (x *transaction) lacksProducer() bool { return x.exactlyOnce && x.producer == nil }

// openFor is how long the producer's transaction has been open (0: none open, or no
// producer).
func (x *transaction) openFor() time.Duration {
	if x.producer == nil {
		return 0
	}
	return x.producer.OpenFor(time.Now())
}

// open reports whether records were sent since the last commit or abort.
func (x *transaction) open() bool { return x.producer != nil && x.producer.InTransaction() }

func (x *transaction) send(ctx context.Context, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader) error {
	return x.producer.Send(ctx, topic, partition, key, value, headers, time.Now())
}

func (x *transaction) sendAt(ctx context.Context, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader, ts time.Time) error {
	return x.producer.Send(ctx, topic, partition, key, value, headers, ts)
}

// commitOffsets is the production commitFunc.
func (x *transaction) commitOffsets(ctx context.Context, offsets map[string]map[int32]int64) error {
	if x.exactlyOnce {
		meta := sarama.NewConsumerGroupMetadataFromSession(x.sess, x.groupID, nil)
		meta.GenerationID = x.generation
		return x.producer.Commit(ctx, offsets, meta)
	}
	if err := x.producer.Flush(ctx); err != nil {
		return err
	}
	for topic, parts := range offsets {
		for p, off := range parts {
			x.sess.MarkOffset(topic, p, off, "")
		}
	}
	return nil
}

// flush waits until every record sent in the open transaction is acknowledged (the
// commit's first step, which the worker times apart).
func (x *transaction) flush(ctx context.Context) error {
	if x.producer == nil {
		return nil
	}
	return x.producer.Flush(ctx)
}

// checkpoint returns the offset after the last record the committed transaction wrote
// to a partition, and whether it wrote there.
func (x *transaction) checkpoint(topic string, partition int32) (int64, bool) {
	off, ok := x.producer.Offset(topic, partition)
	return off + 1, ok
}

// abort aborts the open transaction.
func (x *transaction) abort(ctx context.Context) error {
	err := x.producer.Abort(ctx)
	if err == nil {
		x.nonce = 0
	}
	return err
}

// recreate closes the producer and creates a new one, which settles the open
// transaction one way or the other.
func (x *transaction) recreate(ctx context.Context) error {
	if x.producer != nil {
		_ = x.producer.Close()
		x.producer = nil
	}
	return x.ensure(ctx)
}

// drop aborts the open transaction (best effort, bounded) and closes the producer.
func (x *transaction) drop() {
	if x.producer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if x.producer.Transactional() {
		_ = x.producer.Abort(ctx)
	}
	cancel()
	_ = x.producer.Close()
	x.producer = nil
}

// close drops the producer and ends the creator (a creation under way is abandoned).
func (x *transaction) close() {
	x.drop()
	x.creator.Close()
}

// work is a task's side of the open unit of work: the input processed since the last
// commit (kept for replay after an abort, under exactly-once), the consumed position
// per source topic, and the record count.
type work struct {
	kept       []graph.RawRecord
	consumed   map[string]int64 // per source topic: the offset after the last processed record
	pending    int              // records processed since the last commit (since the seal, while sealed)
	lastCommit time.Time
	// sealed: a commit is under way while the task processes on (an overlapped
	// commit); sealedConsumed and sealedKept are where its input ended: its consumed
	// positions and how many of the kept records are its.
	sealed         bool
	sealedConsumed map[string]int64
	sealedKept     int
}

// seal marks where the input of the commit now under way ends; what is processed
// from now on belongs to the next one.
func (w *work) seal() {
	if w.sealedConsumed == nil {
		w.sealedConsumed = map[string]int64{}
	}
	clear(w.sealedConsumed)
	maps.Copy(w.sealedConsumed, w.consumed)
	w.sealedKept, w.sealed = len(w.kept), true
	w.pending = 0
}

// committedPositions returns the consumed positions of the unit of work that
// committed: the sealed one's while sealed.
func (w *work) committedPositions() map[string]int64 {
	if w.sealed {
		return w.sealedConsumed
	}
	return w.consumed
}

// keptReuse is the capacity up to which a task always reuses its kept-records array
// after a commit; a larger one is reused while commits fill at least a quarter of it.
const keptReuse = 4096

// begin starts a session's work: nothing processed yet.
func (w *work) begin() {
	w.consumed = map[string]int64{}
	w.kept, w.pending = nil, 0
	w.sealed, w.sealedKept = false, 0
	w.lastCommit = time.Now()
}

// processed records that rec went through the task.
func (w *work) processed(rec graph.RawRecord) {
	w.consumed[rec.Topic] = rec.Offset + 1
	w.pending++
}

// done ends the unit of work after its commit (or after learning it committed). While
// sealed, the sealed one ended: its kept input goes, the next one's stays.
func (w *work) done() {
	w.lastCommit = time.Now()
	if w.sealed {
		n := copy(w.kept, w.kept[w.sealedKept:])
		clear(w.kept[n:])
		w.kept, w.sealed, w.sealedKept = w.kept[:n], false, 0
		return
	}
	if cap(w.kept) > keptReuse && len(w.kept) < cap(w.kept)/4 {
		w.kept = nil // a burst's large array would otherwise stay with every task
	} else {
		clear(w.kept) // let the kept records' bytes go
		w.kept = w.kept[:0]
	}
	w.pending = 0
}

// takeKept returns the kept input for a replay and starts the work afresh.
func (w *work) takeKept() []graph.RawRecord {
	kept := w.kept
	w.kept = make([]graph.RawRecord, 0, len(kept))
	w.consumed = map[string]int64{}
	w.pending = 0
	w.sealed, w.sealedKept = false, 0
	return kept
}

// drop forgets the open unit of work (its transaction was abandoned).
func (w *work) drop() { w.kept, w.pending, w.sealed, w.sealedKept = nil, 0, false, 0 }
