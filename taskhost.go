package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
)

// taskHost is all a task asks of the runtime that runs it. The runtime implements it; a
// task holds nothing else of the runtime's.
type taskHost interface {
	offsetsSource
	// checkOwnership asks the group coordinator whether this member still holds the
	// task whose partition of topic is given, in a stable group; if not, the error's
	// recovery is taskMigrated.
	checkOwnership(ctx context.Context, sess sarama.ConsumerGroupSession, id processor.TaskID, topic string) error
	// partitionCount returns the partition count of an output topic.
	partitionCount(topic string) (int32, error)
	// outputLimit returns the largest record batch an output topic takes
	// (max.message.bytes), and 0 when eddy cannot tell (outputerror.go).
	outputLimit(topic string) int
	// requestRejoin ends the group session, forcing a new generation.
	requestRejoin(sess sarama.ConsumerGroupSession)
	// commitHeld reports whether a worker whose transaction has been open for open
	// should put off its commit (cooperative rebalancing: a join is under way).
	commitHeld(sess sarama.ConsumerGroupSession, open time.Duration) bool
	// enterCommit waits until a commit in sess may go ahead (cooperative rebalancing:
	// not during a join) and returns the group generation the commit carries and the
	// function that ends the commit.
	enterCommit(ctx context.Context, sess sarama.ConsumerGroupSession, open time.Duration) (generation int32, leave func())
	// fail stops the application with err.
	fail(err error)
	// flushSlot and restoreSlot bound the CPU-bound store writes and restores running
	// at once across tasks; each returns the function that gives the slot back.
	flushSlot() (release func())
	restoreSlot(ctx context.Context) (release func(), err error)
	// restorer returns a restorer of changelogs into stores, for the task to adjust.
	restorer() restore.Restorer
	// globalBackend returns the backend of the global stores (nil: none).
	globalBackend() kvstore.Backend
	// purge asks for the records of a partition below an offset to be deleted, later
	// and on another goroutine (purger); store names the window store whose changelog
	// the topic is ("" for a repartition topic).
	purge(topic string, partition int32, below int64, store string)
	// groupOffset returns the consumer group's committed offset of a partition
	// (negative: none).
	groupOffset(topic string, partition int32) (int64, error)
	// startOffset returns where a partition without a committed offset starts: its end
	// for a topic read from the latest offset, else its log start.
	startOffset(topic string, partition int32) (int64, error)
	// probeInput reads what one read_committed Fetch returns of a source partition in
	// [from, end): whether it holds records, and the offset past what it read (inbox,
	// behindWait).
	probeInput(topic string, partition int32, from, end int64) (records bool, next int64, err error)
}

// taskSettings is what every task of a runtime is made with.
type taskSettings struct {
	appID           string
	graph           *graph.Graph
	stateDir        string // <StateDir>/<ApplicationID>
	exactlyOnce     bool
	producerPerTask bool
	overlapCommits  bool // Config.OverlapCommits, under exactly-once
	commitInterval  time.Duration
	commitRecords   int
	maxTaskIdle     time.Duration
	txnTimeout      time.Duration
	purgeInterval   time.Duration
	storeNoSync     bool
	// storeWriteInterval is how long committed store changes may be held in memory
	// before they are written (Config.StoreWriteInterval).
	storeWriteInterval time.Duration
	// taskTimeout bounds the retries of a task's preparation (Config.TaskTimeout).
	taskTimeout  time.Duration
	badRecords   task.ErrorPolicy
	outputErrors task.ErrorPolicy // Config.OnOutputError
	// processingErrors is Config.OnProcessingError.
	processingErrors task.ErrorPolicy
	deadLetterTopic  string
	onRestore        func(processor.TaskID, changelog.Result)
	producer         producer.Config // without a transactional ID
	logger           *slog.Logger
	metrics          *metrics.Metrics
	// commitSeam, if set, wraps every transaction's commit step (fault-injection
	// tests); tasks tells the tasks whose work the transaction carries.
	commitSeam func(tasks func() []processor.TaskID, next commitFunc) commitFunc
}

func (rt *runtime) taskSettings() taskSettings {
	cfg := rt.cfg
	return taskSettings{
		appID: cfg.ApplicationID, graph: rt.g, stateDir: rt.appDir,
		exactlyOnce:     cfg.Guarantee == ExactlyOnce,
		producerPerTask: cfg.ProducerPerTask,
		overlapCommits:  cfg.OverlapCommits && cfg.Guarantee == ExactlyOnce,
		commitInterval:  cfg.CommitInterval, commitRecords: cfg.CommitRecords,
		maxTaskIdle: cfg.MaxTaskIdle,
		txnTimeout:  cfg.TransactionTimeout, purgeInterval: cfg.RepartitionPurgeInterval,
		storeNoSync: cfg.StoreNoSync, storeWriteInterval: cfg.StoreWriteInterval, badRecords: taskPolicy(cfg.OnBadRecord), outputErrors: taskPolicy(cfg.OnOutputError), processingErrors: taskPolicy(cfg.OnProcessingError), deadLetterTopic: cfg.DeadLetterTopic,
		taskTimeout: cfg.TaskTimeout,
		onRestore:   cfg.OnRestore,
		producer:    producer.Config{Brokers: cfg.Brokers, Sarama: rt.sc, TransactionTimeout: cfg.TransactionTimeout},
		logger:      rt.logger,
		metrics:     rt.metrics,
		commitSeam:  rt.app.commitSeam,
	}
}

func (rt *runtime) checkOwnership(ctx context.Context, sess sarama.ConsumerGroupSession, id processor.TaskID, topic string) error {
	notOurs := func(why string) error {
		return &taskError{task: id, op: "check ownership", rec: taskMigrated, err: errors.New(why)}
	}
	if sess == nil || sess.Context().Err() != nil {
		return notOurs("the group session ended")
	}
	groups, err := rt.admin.DescribeConsumerGroups([]string{rt.cfg.ApplicationID})
	if err != nil || len(groups) != 1 {
		return &taskError{task: id, op: "check ownership", rec: settleTxn, err: fmt.Errorf("describe group: %w", err)}
	}
	g := groups[0]
	if !errors.Is(g.Err, sarama.ErrNoError) {
		return &taskError{task: id, op: "check ownership", rec: settleTxn, err: fmt.Errorf("describe group: %w", g.Err)}
	}
	if g.State != "Stable" {
		return notOurs(fmt.Sprintf("the group is %s", g.State))
	}
	m, ok := g.Members[sess.MemberID()]
	if !ok {
		return notOurs("this member left the group")
	}
	a, err := m.GetMemberAssignment()
	if err != nil || a == nil {
		return notOurs("unreadable assignment")
	}
	if !slices.Contains(a.Topics[topic], id.Partition) {
		return notOurs("assigned to another member")
	}
	return nil
}

// partitionCount returns (and caches) the partition count of an output topic.
func (rt *runtime) partitionCount(topic string) (int32, error) {
	rt.partsMu.Lock()
	n, ok := rt.partitions[topic]
	rt.partsMu.Unlock()
	if ok {
		return n, nil
	}
	parts, err := rt.client.Partitions(topic)
	if err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return 0, fmt.Errorf("%w: %q", ErrMissingTopic, topic)
		}
		return 0, err
	}
	n = int32(len(parts))
	rt.partsMu.Lock()
	rt.partitions[topic] = n
	rt.partsMu.Unlock()
	return n, nil
}

// topicIDs returns the IDs of topics (Kafka 2.8+ metadata); a topic missing from the
// answer, or a broker too old to give IDs, has none. Errors are the caller's to log:
// without IDs the task still refuses a floor above a partition's end (see
// offsetsRecord.read).
func (rt *runtime) topicIDs(topics []string) (map[string]sarama.Uuid, error) {
	broker := rt.client.LeastLoadedBroker() // opened by sarama
	if broker == nil {
		return nil, errors.New("no broker to ask for topic IDs")
	}
	resp, err := broker.GetMetadata(sarama.NewMetadataRequest(rt.sc.Version, topics))
	if err != nil {
		return nil, err
	}
	ids := map[string]sarama.Uuid{}
	for _, t := range resp.Topics {
		if errors.Is(t.Err, sarama.ErrNoError) && t.Uuid != (sarama.Uuid{}) {
			ids[t.Name] = t.Uuid
		}
	}
	return ids, nil
}

func (rt *runtime) readLast(ctx context.Context, topic string, partition int32, window int) (map[string][]byte, error) {
	wait := rt.stableWait()
	return kread.ReadLast(ctx, rt.restoreC, topic, partition, window, []byte(commitKey), wait, func(lastStable, highWater int64) {
		rt.logger.Info("a transaction is open on the offsets partition (a previous owner stalled or died in a commit); waiting for it to end before reading the offsets record, which may lie behind it",
			"topic", topic, "partition", partition, "last_stable_offset", lastStable, "high_water_mark", highWater, "bound", wait)
	})
}

// stableWait bounds a reader's wait for the transactions open on a changelog or offsets
// partition to end before it takes the last stable offset for the end
// (kread.StableOffsets): they are this application's, so they end within its
// transaction timeout, or are aborted by the broker at its next check after that.
func (rt *runtime) stableWait() time.Duration {
	return kread.StableBound(rt.cfg.TransactionTimeout)
}

func (rt *runtime) startOffset(topic string, partition int32) (int64, error) {
	if rt.latest[topic] {
		return kread.HighWaterMark(rt.restoreC, topic, partition)
	}
	return kread.ListOffset(rt.restoreC, topic, partition, sarama.OffsetOldest)
}

// probeInput uses the restore client: its fetches do not wait behind the group's long
// polls. 64 KiB is enough to see past a marker or a few aborted batches; a gap it does
// not cover is probed again from where this one stopped.
func (rt *runtime) probeInput(topic string, partition int32, from, end int64) (bool, int64, error) {
	recs, next, err := kread.Fetch(rt.restoreC, topic, partition, from, end, 64<<10)
	return len(recs) > 0, next, err
}

func (rt *runtime) highWaterMark(topic string, partition int32) (int64, error) {
	return kread.HighWaterMark(rt.restoreC, topic, partition)
}

// flushSlot waits for a slot without a context: the caller's transaction is committed,
// and giving up would stop the application; every flush holding a slot ends on its own.
func (rt *runtime) flushSlot() func() {
	rt.flushSlots <- struct{}{}
	return func() { <-rt.flushSlots }
}

func (rt *runtime) restoreSlot(ctx context.Context) (func(), error) {
	select {
	case rt.restoreSlots <- struct{}{}:
		return func() { <-rt.restoreSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (rt *runtime) restorer() restore.Restorer { return *rt.restoreProto }

func (rt *runtime) purge(topic string, partition int32, below int64, store string) {
	rt.purger.purge(topic, partition, below, store)
}

func (rt *runtime) groupOffset(topic string, partition int32) (int64, error) {
	offs, err := rt.admin.ListConsumerGroupOffsets(rt.cfg.ApplicationID, map[string][]int32{topic: {partition}})
	if err != nil {
		return -1, err
	}
	if b := offs.GetBlock(topic, partition); b != nil {
		return b.Offset, nil
	}
	return -1, nil
}
