package eddy

import (
	"context"
	"github.com/eddy-streams/eddy/internal/producer"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
)

// taskRunner owns one task while this instance is assigned it: its transaction, stores,
// engine and input. Its run method is the task's goroutine for one group session;
// between sessions the task stays open (suspended) if it is assigned again. The files
// task*.go hold its parts: taskrunner.go its life, taskopen.go its stores and restore,
// taskcommit.go the commit, taskrecovery.go what it does when a transaction fails.
type taskRunner struct {
	host   taskHost
	cfg    taskSettings
	id     processor.TaskID
	sub    *graph.Subtopology
	topics []string // the resolved source topics, sorted
	logger *slog.Logger

	// committed is where the committed input ends; the inbox, the offsets record and
	// the commit share it.
	committed *committedOffsets
	inbox     *inbox
	record    *offsetsRecord

	runMu sync.Mutex // held by run; close waits for it
	dead  atomic.Bool
	state atomic.Int32 // a taskState
	// queryMu guards the stores against closing while an interactive query reads them.
	queryMu    sync.RWMutex
	metrics    *metrics.Task
	bufferKeys atomic.Pointer[map[string]int] // dirty keys per store, for the metrics
	// nodeRecords holds the records per node (task.Task.NodeRecords) as of the task
	// goroutine's last publication, for the console; published at most once a second
	// while records flow, so the hot path counts with plain integers.
	nodeRecords atomic.Pointer[map[string]int64]
	// restoreLeft is the changelog offsets each store had left to restore at its last
	// restore's progress report (for /tasks).
	// restoreEnd is the changelog offset each store's restore reads up to (for stale
	// queries, querystale.go).
	restoreMu   sync.Mutex
	restoreLeft map[string]int64
	restoreEnd  map[string]int64
	// life ends when the task closes. Sends and commits run under it (with timeouts),
	// not under the session's context: a rebalance must not cut a commit in half.
	life    context.Context
	endLife context.CancelFunc

	// The fields below belong to the goroutine holding runMu (txn.creator excepted:
	// OnAssignment may create the producer before the task runs).
	txn          *transaction // the task's own (ownTxn), or its worker's for the session
	ownTxn       bool
	work         work
	eng          *task.Task
	set          *kvstore.Set
	initDone     bool
	changelogs   map[string]string // store → changelog topic
	logged       []string          // the stores whose changelog the open commit writes
	lateReported int64             // late records counted in eddy_dropped_records_total
	sess         sarama.ConsumerGroupSession
	partCounts   map[string]int32 // partition counts of output topics
	outLimits    map[string]int   // max.message.bytes of output topics (0: not checked)
	// isolate and refused are what the broker's permanent refusals of output records
	// taught the task for its replays (outputrefusal.go).
	isolate       map[outputPartition]bool
	refused       map[refusedOutput]*producer.RecordError
	purgeTopics   []string         // the repartition topics the task reads
	lastPurge     time.Time        // when it last deleted their committed records
	trimmed       map[string]int64 // store → offset its changelog was last asked to be trimmed below
	failingSince  time.Time        // when the current run of failed transactions began (zero: none)
	nodesAt       time.Time        // when nodeRecords was last published
	nodesStale    bool             // records were processed since
	storesCurrent bool             // see restore
	// carriedIn is the cooperative session in which the task's worker was stopped with
	// its own commit and started again on it (crew.reshift): while that session lasts,
	// its claims stayed open and nobody else wrote its offsets record or changelogs, so
	// the next ready need not read them back (nil: it must).
	carriedIn sarama.ConsumerGroupSession
}

func newTaskRunner(host taskHost, cfg taskSettings, id processor.TaskID) *taskRunner {
	sub := cfg.graph.Subtopologies[id.Subtopology]
	life, end := context.WithCancel(context.Background())
	var purge []string
	for _, r := range sub.RepartitionSources {
		purge = append(purge, names.RepartitionTopic(cfg.appID, r))
	}
	var txn *transaction
	if cfg.producerPerTask {
		pc := cfg.producer
		if cfg.exactlyOnce {
			pc.TransactionalID = names.TransactionalID(cfg.appID, id.String())
		}
		txn = newTransaction(pc, cfg.appID)
		if cfg.commitSeam != nil {
			txn.commit = cfg.commitSeam(func() []processor.TaskID { return []processor.TaskID{id} }, txn.commit)
		}
	}
	logger := cfg.logger.With("task", id.String())
	topics := slices.Sorted(slices.Values(sub.AllSourceTopics(cfg.appID)))
	committed := newCommittedOffsets()
	metrics := cfg.metrics.Task(id.String())
	in := newInbox(committed, cfg.maxTaskIdle)
	in.enforced = func(topic string, waited time.Duration, behind bool) {
		// Debug, as Kafka Streams logs it at trace: a join's quiet side makes it once
		// per silence. The metric counts it.
		logger.Debug("processing the task's other input partitions past an empty one: records may be processed out of timestamp order across them (Config.MaxTaskIdle)",
			"topic", topic, "partition", id.Partition, "waited", waited, "behind_high_water_mark", behind)
		metrics.EnforcedProcessing(topic)
	}
	if host != nil {
		in.probe = func(topic string, from, end int64) (bool, int64, error) {
			records, next, err := host.probeInput(topic, id.Partition, from, end)
			if err != nil {
				logger.Debug("probing an empty input partition behind its high-water mark failed; waiting for it at most behindWait", "topic", topic, "partition", id.Partition, "from", from, "error", err)
			}
			return records, next, err
		}
	}
	return &taskRunner{
		host: host, cfg: cfg, id: id, sub: sub, topics: topics, purgeTopics: purge,
		txn: txn, ownTxn: txn != nil, logger: logger,
		committed: committed,
		inbox:     in,
		record: &offsetsRecord{
			topic:     names.ChangelogTopic(cfg.appID, names.OffsetsStore(sub.ID)),
			partition: id.Partition, sources: topics, committed: committed, logger: logger,
		},
		life: life, endLife: end,
		metrics: metrics,
	}
}

// broken reports whether the task must be recreated rather than resumed.
func (t *taskRunner) broken() bool {
	if t.dead.Load() {
		return true
	}
	if !t.runMu.TryLock() {
		return false
	}
	defer t.runMu.Unlock()
	return t.ownTxn && t.txn.lacksProducer() && t.eng != nil
}

// beginSession prepares the task's input for a new group session; called by Setup
// before the claims start.
func (t *taskRunner) beginSession() {
	t.committed.newSession()
	t.inbox.reset(t.topics...)
	if t.dead.Load() {
		t.inbox.close()
	}
}

// claim starts the claim of a source topic's partition at offset, the group's committed
// offset; hwm reports the claim's high-water mark.
func (t *taskRunner) claim(topic string, offset int64, hwm func() int64) {
	t.inbox.start(topic, offset, hwm)
	if known := t.committed.claim(topic, offset); known > offset && offset >= 0 {
		t.logger.Warn("the group coordinator answered a committed offset older than the task's own record; skipping the committed records in between",
			"topic", topic, "partition", t.id.Partition, "coordinator", offset, "recorded", known, "known_from", "before this session: its commits, or its offsets record read earlier")
	}
}

// dropWork drops the task's uncommitted work: the store buffers, the engine's time
// state and caches since the last commit, the kept input.
// sinkAbandonTimeout bounds discarding a dropped unit of work's sink transactions that
// were not prepared (a database that does not answer must not hold up a rebalance:
// the transaction dies with its connection anyway).
const sinkAbandonTimeout = 10 * time.Second

func (t *taskRunner) dropWork() {
	if t.set != nil {
		t.set.Discard()
	}
	// Records of the dropped transaction may be in the changelogs (at-least-once
	// writes them without a transaction): the next session restores.
	t.storesCurrent = false
	if t.eng != nil {
		// The engine's time state and the tables' caches belong to the dropped work
		// too: back to the last commit (a kept at-least-once task goes on with them).
		t.eng.Rollback()
		ctx, cancel := context.WithTimeout(context.Background(), sinkAbandonTimeout)
		if err := t.eng.Sinks().Abandon(ctx); err != nil {
			t.logger.Warn("discarding the open sink transactions failed", "error", err)
		}
		cancel()
	}
	t.work.drop()
}

// processChunk runs up to limit buffered records through the task. It stops early,
// with need set, when the record count or a processor asks for a commit or when the
// clock passes due (the worker's commit is due: checked after every record with the
// clock its processing time already reads, so it costs nothing more), and at a
// processing error; ran is how many records it ran, more says records may remain.
func (t *taskRunner) processChunk(limit int, due time.Time) (ran int, need, more bool, err error) {
	if t.nodesStale && time.Since(t.nodesAt) >= time.Second {
		t.publishNodeRecords()
	}
	for ran < limit {
		msg, ok := t.inbox.pop()
		if !ok {
			if t.nodesStale {
				t.publishNodeRecords()
			}
			return ran, false, false, nil
		}
		ran++
		t.nodesStale = true
		began := time.Now()
		if err := t.process(toRaw(msg)); err != nil {
			return ran, false, true, err
		}
		took := time.Since(began)
		t.metrics.Processed(took)
		if t.work.pending >= t.cfg.commitRecords || t.eng.CommitRequested() || !began.Add(took).Before(due) {
			return ran, true, true, nil
		}
	}
	return ran, false, true, nil
}

// publishNodeRecords publishes the engine's records per node for the console.
func (t *taskRunner) publishNodeRecords() {
	m := map[string]int64{}
	t.eng.NodeRecords(m)
	t.nodeRecords.Store(&m)
	t.nodesAt, t.nodesStale = time.Now(), false
}

// process runs one record through the task's engine.
func (t *taskRunner) process(rec graph.RawRecord) error {
	if t.cfg.exactlyOnce {
		t.work.kept = append(t.work.kept, rec)
	}
	if err := t.eng.Process(rec); err != nil {
		return err
	}
	t.work.processed(rec)
	return nil
}

// close releases everything the task holds; an open transaction is aborted.
func (t *taskRunner) close() {
	t.inbox.close()
	t.endLife()
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if err := transition(&t.state, t.id, taskClosed); err != nil {
		return // closed already
	}
	t.queryMu.Lock()
	defer t.queryMu.Unlock()
	t.dropWork()
	if t.ownTxn {
		t.txn.close()
	}
	if t.eng != nil {
		if err := t.eng.Close(); err != nil {
			t.logger.Warn("closing the task's processors", "error", err)
		}
		t.eng = nil
	}
	if t.set != nil {
		if err := t.set.Close(); err != nil {
			t.logger.Warn("closing the task's stores", "error", err)
		}
		t.set = nil
	}
	t.dead.Store(true)
}
