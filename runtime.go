package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kafkaerr"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/processor"
)

// runtime is one running instance of an App: its Kafka clients, its consumer group and
// its tasks.
type runtime struct {
	app    *App
	cfg    Config
	g      *graph.Graph
	logger *slog.Logger
	sc     *sarama.Config

	client   sarama.Client // group, metadata, offsets, at-least-once producers
	admin    sarama.ClusterAdmin
	restoreC sarama.Client // changelog fetches, apart from the group's long polls
	// restoreProto is the restorer every task copies and adjusts.
	restoreProto *restore.Restorer
	// restoreSlots bounds the stores restoring at once.
	restoreSlots chan struct{}
	// flushSlots bounds the tasks writing their stores at once (see taskRunner.commit).
	flushSlots chan struct{}
	// purger deletes the records the tasks no longer need, off their goroutines.
	purger   *purger
	assignor *assignor
	lockFile *os.File
	appDir   string
	// instance is the state dir's instance ID (InstanceIDFile); empty with
	// Config.ProducerPerTask, which names no transactional ID after it.
	instance string

	topics     []string                      // the group's subscription: every source topic
	topicToSub map[string]*graph.Subtopology // resolved source topic → sub-topology
	latest     map[string]bool               // user topics read from the latest offset (offsetreset.go)
	partsMu    sync.Mutex
	partitions map[string]int32 // partition counts of output topics
	msgLimits  map[string]int   // max.message.bytes of output topics (outputerror.go), under partsMu

	// global keeps the global stores (globaltable.go); nil without any.
	global *globalState

	// registry alone holds the task set, the generation and the task owners.
	registry *taskRegistry
	// settings are what every task is made with.
	settings taskSettings
	// workers run the tasks, a share each, unless Config.ProducerPerTask.
	workers []*worker
	// standbys are the standby replicas this instance keeps (standby.go).
	standbys standbys

	mu     sync.Mutex
	rejoin chan struct{} // closed to end the current session
	// cancelSession cancels the context of the current group.Consume (endSession).
	cancelSession context.CancelFunc

	metrics   *metrics.Metrics
	failed    atomic.Bool
	stopping  atomic.Bool
	inSession atomic.Bool
	sessions  atomic.Int64

	// fatal carries the first error that stops the application.
	fatalOnce sync.Once
	fatalErr  error
	stop      context.CancelCauseFunc
}

func newRuntime(a *App) (*runtime, error) {
	cfg := a.cfg
	sc := *a.sarama
	rt := &runtime{
		app: a, cfg: cfg, g: a.g, sc: &sc,
		logger:     cfg.Logger.With("app", cfg.ApplicationID),
		topicToSub: map[string]*graph.Subtopology{},
		partitions: map[string]int32{},
		registry:   newTaskRegistry(),
		latest:     latestTopics(a.g),
		appDir:     filepath.Join(cfg.StateDir, cfg.ApplicationID),
	}
	for _, s := range a.g.Subtopologies {
		for _, t := range s.AllSourceTopics(cfg.ApplicationID) {
			rt.topics = append(rt.topics, t)
			rt.topicToSub[t] = s
		}
	}
	sort.Strings(rt.topics)
	if err := rt.lockStateDir(); err != nil {
		return nil, err
	}
	if err := rt.openGlobal(); err != nil {
		rt.unlockStateDir()
		return nil, err
	}
	// The assignor first: the metrics' collector reads it (the warm-ups among the
	// standbys) as soon as it is registered, and a scrape may come at once
	// (TestLateRecordsAreCounted's race under -race in CI on 6a3a82c).
	rt.useAssignor()
	if err := rt.registerMetrics(); err != nil {
		rt.closeGlobal()
		rt.unlockStateDir()
		return nil, err
	}
	if err := rt.connect(); err != nil {
		rt.closeGlobal()
		rt.unlockStateDir()
		return nil, err
	}
	rt.restoreProto = &restore.Restorer{Client: rt.restoreC, Logger: rt.logger, StableWait: rt.stableWait()}
	rt.purger = newPurger(rt.purgeClient, cfg.RepartitionPurgeInterval, rt.logger)
	// Restores and store writes are CPU-bound: more at once than cores is no faster.
	slots := max(2, goruntime.GOMAXPROCS(0))
	rt.restoreSlots = make(chan struct{}, slots)
	rt.flushSlots = make(chan struct{}, slots)
	rt.settings = rt.taskSettings()
	if !cfg.ProducerPerTask {
		instance, err := rt.instanceID()
		if err != nil {
			rt.close()
			return nil, err
		}
		rt.instance = instance
		for i := range cfg.Workers {
			txnID := names.TransactionalID(cfg.ApplicationID, fmt.Sprintf("%s-%d", instance, i))
			rt.workers = append(rt.workers, newWorker(rt, rt.settings, i, txnID))
		}
	}
	return rt, nil
}

// useAssignor makes eddy's assignor the group's strategy, wired to the runtime.
func (rt *runtime) useAssignor() {
	rt.assignor = newAssignor(rt.g, rt.cfg.ApplicationID)
	rt.assignor.host = rt.cfg.AdvertisedAddr
	rt.assignor.standbys = rt.cfg.NumStandbyReplicas
	rt.assignor.warm.acceptableLag = rt.cfg.AcceptableRecoveryLag
	rt.assignor.warm.max = rt.cfg.MaxWarmupReplicas
	rt.assignor.warm.rack = rt.cfg.Rack
	rt.assignor.onAssign = rt.onAssignment
	rt.assignor.localState = rt.localState
	rt.assignor.taskOffsets = rt.taskOffsets
	rt.assignor.endOffsets = rt.changelogEnds
	rt.assignor.logf = func(msg string, args ...any) { rt.logger.Warn(msg, args...) }
	rt.sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{rt.assignor}
}

// registerMetrics registers the runtime's metrics with Config.Metrics, if set.
func (rt *runtime) registerMetrics() error {
	if rt.cfg.Metrics == nil {
		return nil
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"application_id": rt.cfg.ApplicationID}, rt.cfg.Metrics)
	m, err := metrics.New(reg, rt.snapshot)
	if err != nil {
		return fmt.Errorf("eddy: register metrics: %w", err)
	}
	rt.metrics = m
	return nil
}

// connect makes the runtime's clients: one for the group, metadata and offsets (and the
// admin on it), one for changelog reads, apart from the group's long polls.
func (rt *runtime) connect() error {
	brokers := rt.cfg.Brokers
	var err error
	if rt.client, err = sarama.NewClient(brokers, rt.sc); err != nil {
		return fmt.Errorf("eddy: connect to brokers %v: %w", brokers, err)
	}
	if rt.admin, err = sarama.NewClusterAdminFromClient(rt.client); err != nil {
		_ = rt.client.Close()
		return fmt.Errorf("eddy: admin client: %w", err)
	}
	if rt.restoreC, err = sarama.NewClient(brokers, rt.sc); err != nil {
		_ = rt.admin.Close()
		return fmt.Errorf("eddy: connect to brokers %v: %w", brokers, err)
	}
	return nil
}

// purgeClient connects the purger's own admin client (purger).
func (rt *runtime) purgeClient() (recordDeleter, error) {
	c, err := sarama.NewClient(rt.cfg.Brokers, rt.sc)
	if err != nil {
		return nil, fmt.Errorf("connect to brokers %v: %w", rt.cfg.Brokers, err)
	}
	admin, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return admin, nil
}

func (rt *runtime) close() {
	rt.stopStandbys()
	for _, t := range rt.registry.takeAll() {
		t.close()
	}
	for _, w := range rt.workers {
		w.close()
	}
	rt.closeGlobal()
	_ = rt.admin.Close() // closes the client too
	_ = rt.restoreC.Close()
	rt.unlockStateDir()
}

// fail records the first fatal error and stops the application.
func (rt *runtime) fail(err error) {
	rt.fatalOnce.Do(func() {
		err = rt.explainOutput(err)
		rt.fatalErr = err
		rt.failed.Store(true)
		rt.logger.Error("stopping the application", "error", err)
		if rt.stop != nil {
			rt.stop(err)
		}
	})
}

// run joins the group and consumes until ctx ends or a fatal error.
func (rt *runtime) run(parent context.Context) error {
	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)
	rt.mu.Lock()
	rt.stop = stop
	rt.mu.Unlock()
	if rt.fatalErr != nil {
		return rt.fatalErr
	}

	// Global stores first: tasks start with them up to date (Kafka Streams bootstraps
	// global state before its stream threads start).
	if err := rt.startGlobal(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer rt.stopGlobal()
	purgeCtx, stopPurging := context.WithCancel(ctx)
	var purging sync.WaitGroup
	purging.Go(func() { rt.purger.run(purgeCtx) })
	defer func() {
		stopPurging()
		purging.Wait()
	}()
	group, err := sarama.NewConsumerGroupFromClient(rt.cfg.ApplicationID, rt.client)
	if err != nil {
		return fmt.Errorf("eddy: consumer group: %w", err)
	}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range group.Errors() {
			// A fetch refused for want of READ on a topic is retried by sarama for
			// ever, each refusal reported here: stop instead.
			if refused(err) {
				rt.fail(fmt.Errorf("eddy: consumer group %q: %w", rt.cfg.ApplicationID, err))
				continue
			}
			if fencedInstance(err) {
				rt.fail(rt.fencedInstanceErr(err))
				continue
			}
			rt.logger.Warn("consumer group", "error", kafkaerr.Explain(err))
		}
	}()
	rt.logger.Info("starting", "guarantee", rt.cfg.Guarantee.String(), "topics", rt.topics, "state_dir", rt.appDir, "group_instance_id", rt.cfg.InstanceID)
	rt.consume(ctx, group)
	rt.stopping.Store(true)
	if rt.cfg.InstanceID != "" {
		// sarama sends no LeaveGroup for a static member (KIP-345): the member stays
		// until its session times out, and an instance back with the same InstanceID
		// before then takes its tasks back without a rebalance.
		rt.logger.Info("stopping: staying in the group as a static member", "group_instance_id", rt.cfg.InstanceID)
	} else {
		rt.logger.Info("stopping: leaving the group")
	}
	if err := group.Close(); err != nil {
		rt.logger.Warn("closing the consumer group", "error", err)
	}
	<-errsDone
	if rt.fatalErr != nil {
		return rt.fatalErr
	}
	return nil
}

// newTask makes the runner of a task newly assigned to this instance.
func (rt *runtime) newTask(id processor.TaskID) *taskRunner {
	return newTaskRunner(rt, rt.settings, id)
}

func (rt *runtime) task(id processor.TaskID) *taskRunner {
	return rt.registry.get(id)
}

// taskFor maps a claimed topic partition to its task.
func (rt *runtime) taskFor(topic string, partition int32) *taskRunner {
	s, ok := rt.topicToSub[topic]
	if !ok {
		return nil
	}
	return rt.task(processor.TaskID{Subtopology: s.ID, Partition: partition})
}

// snapshot reports states and levels to the metrics at scrape time.
func (rt *runtime) snapshot() metrics.Snapshot {
	s := metrics.Snapshot{AppState: string(rt.app.State()), States: allStates, TaskStates: map[string]int{}}
	for st := taskCreated; st < taskClosed; st++ {
		s.TaskStates[st.String()] = 0
	}
	for _, t := range rt.registry.all() {
		st := taskState(t.state.Load())
		if st == taskClosed {
			continue
		}
		s.TaskStates[st.String()]++
		if st == taskRunning {
			for topic, lag := range t.inbox.lag() {
				s.Lag = append(s.Lag, metrics.PartitionLag{Topic: topic, Partition: t.id.Partition, Lag: lag})
			}
		}
		if levels := t.bufferKeys.Load(); levels != nil {
			for store, n := range *levels {
				s.BufferKeys = append(s.BufferKeys, metrics.StoreLevel{Task: t.id.String(), Store: store, Value: float64(n)})
			}
		}
	}
	sbs := rt.standbyInfos()
	warm := rt.assignor.warmups()
	s.TaskStates["standby"], s.TaskStates["warm-up"] = 0, 0
	for _, sb := range sbs {
		if warm[sb.ID] {
			s.TaskStates["warm-up"]++
		} else {
			s.TaskStates["standby"]++
		}
	}
	for _, sb := range sbs {
		for store, lag := range sb.Lag {
			s.StandbyLag = append(s.StandbyLag, metrics.StoreLevel{Task: sb.ID.String(), Store: store, Value: float64(lag)})
		}
		if !sb.CaughtUp.IsZero() {
			s.StandbyAge = append(s.StandbyAge, metrics.StoreLevel{Task: sb.ID.String(), Value: time.Since(sb.CaughtUp).Seconds()})
		}
	}
	return s
}

// consume runs group sessions until ctx ends, the group closes or the broker refuses
// the group's principal; a session that ends otherwise is joined again with backoff.
func (rt *runtime) consume(ctx context.Context, group sarama.ConsumerGroup) {
	h := &groupHandler{rt: rt}
	var rejoin backoff.Backoff
	for ctx.Err() == nil {
		sessCtx, cancel := context.WithCancel(ctx)
		rt.mu.Lock()
		rt.cancelSession = cancel
		rt.mu.Unlock()
		err := group.Consume(sessCtx, rt.topics, h)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			rejoin.Reset()
			continue
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return
		}
		// A refusal does not pass with time: rejoining would retry it for ever.
		if refused(err) {
			rt.fail(fmt.Errorf("eddy: consumer group %q: %w", rt.cfg.ApplicationID, err))
			return
		}
		if sessionTimeoutRefused(err) {
			rt.fail(rt.sessionTimeoutErr(err))
			return
		}
		if fencedInstance(err) {
			rt.fail(rt.fencedInstanceErr(err))
			return
		}
		delay := rejoin.Next()
		rt.logger.Warn("consumer group session ended; rejoining", "error", kafkaerr.Explain(err), "backoff", delay)
		_ = backoff.Sleep(ctx, delay)
	}
}
