package eddy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
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
	// crew runs the workers of the current session under cooperative rebalancing
	// (groupcooperative.go); nil otherwise and between sessions.
	crew *crew
	// withheld are the tasks the first generation of the session about to start
	// withheld (followup.go).
	withheld withheldWatch
	// gate holds the workers' commits during a join of a cooperative session.
	gate *commitGate
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
	rt.subscribe()
	if err := rt.open(); err != nil {
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
		if err := rt.makeWorkers(); err != nil {
			rt.close()
			return nil, err
		}
	}
	return rt, nil
}

// subscribe lists the group's subscription, every source topic in order, and the
// sub-topology of each.
func (rt *runtime) subscribe() {
	for _, s := range rt.g.Subtopologies {
		for _, t := range s.AllSourceTopics(rt.cfg.ApplicationID) {
			rt.topics = append(rt.topics, t)
			rt.topicToSub[t] = s
		}
	}
	sort.Strings(rt.topics)
}

// open locks the state dir, opens the global stores, registers the metrics and
// connects the clients; on an error it undoes what it did.
func (rt *runtime) open() error {
	if err := rt.lockStateDir(); err != nil {
		return err
	}
	if err := rt.openGlobal(); err != nil {
		rt.unlockStateDir()
		return err
	}
	// The assignor first: the metrics' collector reads it (the warm-ups among the
	// standbys) as soon as it is registered, and a scrape may come at once
	// (TestLateRecordsAreCounted's race under -race in CI on 6a3a82c).
	rt.useAssignor()
	if err := rt.registerMetrics(); err != nil {
		rt.closeGlobal()
		rt.unlockStateDir()
		return err
	}
	if err := rt.connect(); err != nil {
		rt.closeGlobal()
		rt.unlockStateDir()
		return err
	}
	return nil
}

// makeWorkers makes the Config.Workers workers, their transactional IDs named after the
// state dir's instance ID.
func (rt *runtime) makeWorkers() error {
	instance, err := rt.instanceID()
	if err != nil {
		return err
	}
	rt.instance = instance
	for i := range rt.cfg.Workers {
		txnID := names.TransactionalID(rt.cfg.ApplicationID, fmt.Sprintf("%s-%d", instance, i))
		rt.workers = append(rt.workers, newWorker(rt, rt.settings, i, txnID))
	}
	return nil
}

// useAssignor makes eddy's assignor the group's strategy, wired to the runtime.
func (rt *runtime) useAssignor() {
	rt.assignor = newAssignor(rt.g, rt.cfg.ApplicationID)
	rt.assignor.host = rt.cfg.AdvertisedAddr
	rt.assignor.standbys = rt.cfg.NumStandbyReplicas
	rt.assignor.cooperative = rt.cfg.RebalanceProtocol == CooperativeRebalancing
	if rt.assignor.cooperative {
		rt.gate = newCommitGate()
		rt.assignor.beforeJoin = rt.beforeJoin
		rt.assignor.onWithheld = rt.onWithheld
	}
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
