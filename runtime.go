package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/names"
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
	restorer *changelog.Restorer
	// restoreSlots bounds the stores restoring at once.
	restoreSlots chan struct{}
	// flushSlots bounds the tasks writing their stores at once (see taskRunner.commit).
	flushSlots chan struct{}
	assignor   *assignor
	lockFile   *os.File
	appDir     string

	topics     []string                      // the group's subscription: every source topic
	topicToSub map[string]*graph.Subtopology // resolved source topic → sub-topology
	latest     map[string]bool               // user topics read from the latest offset (offsetreset.go)
	partsMu    sync.Mutex
	partitions map[string]int32 // partition counts of output topics

	// global keeps the global stores (globaltable.go); nil without any.
	global *globalState

	// registry alone holds the task set, the generation and the task owners.
	registry *taskRegistry

	mu     sync.Mutex
	rejoin chan struct{} // closed to end the current session

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
	if cfg.Metrics != nil {
		reg := prometheus.WrapRegistererWith(prometheus.Labels{"application_id": cfg.ApplicationID}, cfg.Metrics)
		m, err := metrics.New(reg, rt.snapshot)
		if err != nil {
			rt.unlockStateDir()
			return nil, fmt.Errorf("eddy: register metrics: %w", err)
		}
		rt.metrics = m
	}
	rt.assignor = newAssignor(a.g, cfg.ApplicationID)
	rt.assignor.host = cfg.AdvertisedAddr
	rt.assignor.onAssign = rt.onAssignment
	rt.assignor.localState = rt.localState
	rt.assignor.logf = func(msg string, args ...any) { rt.logger.Warn(msg, args...) }
	rt.sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{rt.assignor}
	var err error
	rt.client, err = sarama.NewClient(cfg.Brokers, rt.sc)
	if err != nil {
		rt.unlockStateDir()
		return nil, fmt.Errorf("eddy: connect to brokers %v: %w", cfg.Brokers, err)
	}
	rt.admin, err = sarama.NewClusterAdminFromClient(rt.client)
	if err != nil {
		_ = rt.client.Close()
		rt.unlockStateDir()
		return nil, fmt.Errorf("eddy: admin client: %w", err)
	}
	rt.restoreC, err = sarama.NewClient(cfg.Brokers, rt.sc)
	if err != nil {
		_ = rt.admin.Close()
		rt.unlockStateDir()
		return nil, fmt.Errorf("eddy: connect to brokers %v: %w", cfg.Brokers, err)
	}
	rt.restorer = &changelog.Restorer{Client: rt.restoreC, Logger: rt.logger}
	// Restores and store writes are CPU-bound: more at once than cores is no faster.
	slots := max(2, goruntime.GOMAXPROCS(0))
	rt.restoreSlots = make(chan struct{}, slots)
	rt.flushSlots = make(chan struct{}, slots)
	return rt, nil
}

// StateDirLockFile is the file in <StateDir>/<ApplicationID>/ that a running instance
// holds an exclusive flock on; tools reading a state dir check it.
const StateDirLockFile = ".lock"

// lockStateDir takes an exclusive lock on <StateDir>/<ApplicationID>/.lock, so a second
// instance on the same state dir fails at start with a clear error instead of fighting
// over the task files.
func (rt *runtime) lockStateDir() error {
	if err := os.MkdirAll(rt.appDir, 0o755); err != nil {
		return fmt.Errorf("eddy: state dir %q: %w", rt.appDir, err)
	}
	path := filepath.Join(rt.appDir, StateDirLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("eddy: state dir lock %q: %w", path, err)
	}
	locked, err := flock.TryLock(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("eddy: state dir lock %q: %w", path, err)
	}
	if !locked {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		return fmt.Errorf("%w: %s (held by %s); give each instance its own StateDir", ErrStateDirLocked, rt.appDir, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d\n", os.Getpid())
	rt.lockFile = f
	return nil
}

func (rt *runtime) unlockStateDir() {
	if rt.lockFile != nil {
		_ = flock.Unlock(rt.lockFile)
		_ = rt.lockFile.Close()
		rt.lockFile = nil
	}
}

// localState lists the tasks with a store file in the state dir, for the assignor.
func (rt *runtime) localState() []processor.TaskID {
	entries, err := os.ReadDir(rt.appDir)
	if err != nil {
		return nil
	}
	var out []processor.TaskID
	for _, e := range entries {
		if t, err := processor.ParseTaskID(e.Name()); err == nil && e.IsDir() {
			out = append(out, t)
		}
	}
	return out
}

func (rt *runtime) close() {
	for _, t := range rt.registry.takeAll() {
		t.close()
	}
	rt.closeGlobal()
	_ = rt.admin.Close() // closes the client too
	_ = rt.restoreC.Close()
	rt.unlockStateDir()
}

// fail records the first fatal error and stops the application.
func (rt *runtime) fail(err error) {
	rt.fatalOnce.Do(func() {
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
			rt.logger.Warn("consumer group", "error", err)
		}
	}()
	h := &groupHandler{rt: rt}
	rt.logger.Info("starting", "guarantee", rt.cfg.Guarantee.String(), "topics", rt.topics, "state_dir", rt.appDir)
	var rejoin backoff.Backoff
	for ctx.Err() == nil {
		err := group.Consume(ctx, rt.topics, h)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			// A refusal does not pass with time: rejoining would retry it for ever.
			if refused(err) {
				rt.fail(fmt.Errorf("eddy: consumer group %q: %w", rt.cfg.ApplicationID, err))
				break
			}
			delay := rejoin.Next()
			rt.logger.Warn("consumer group session ended; rejoining", "error", err, "backoff", delay)
			_ = backoff.Sleep(ctx, delay)
			continue
		}
		rejoin.Reset()
	}
	rt.stopping.Store(true)
	rt.logger.Info("stopping: leaving the group")
	if err := group.Close(); err != nil {
		rt.logger.Warn("closing the consumer group", "error", err)
	}
	<-errsDone
	if rt.fatalErr != nil {
		return rt.fatalErr
	}
	return nil
}

// onAssignment runs on sarama's rebalance path right after SyncGroup: it closes the
// tasks this instance lost and creates the producers of the tasks it gained (in
// parallel, bounded in time), before sarama reads the committed offsets.
func (rt *runtime) onAssignment(assigned []processor.TaskID, generation int32, hosts map[string][]string) {
	rt.metrics.Rebalance()
	prevGen := rt.registry.newGeneration(generation, hosts)
	// A task kept across a generation gap may have been owned and changed by another
	// instance in between: start it afresh.
	closing, fresh := rt.registry.reconcile(assigned, func(t *taskRunner) bool {
		return generation != prevGen+1 || t.broken()
	}, rt.newTask)
	for _, t := range closing {
		t.close()
	}
	if len(closing) > 0 || len(fresh) > 0 {
		rt.logger.Info("assignment", "generation", generation, "tasks", assigned, "closed", len(closing), "new", len(fresh))
	}
	if rt.cfg.Guarantee != ExactlyOnce {
		return
	}
	// Producers first: creating one fences the task's previous producer and settles its
	// open transaction, so the committed offsets sarama reads next are stable.
	ctx, cancel := context.WithTimeout(context.Background(), rt.producerInitTimeout())
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, t := range fresh {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := t.initProducer(ctx); err != nil {
				rt.logger.Warn("creating the task's producer failed; retrying when the task starts", "task", t.id.String(), "error", err)
			}
		})
	}
	wg.Wait()
}

func (rt *runtime) producerInitTimeout() time.Duration {
	// The group waits for us while this runs (no heartbeats yet): stay well inside the
	// session timeout.
	return max(rt.sc.Consumer.Group.Session.Timeout/2, 2*time.Second)
}

// refused reports whether the broker refused the group's principal: no READ on the
// group or a topic, or failed authentication.
func refused(err error) bool {
	return errors.Is(err, sarama.ErrGroupAuthorizationFailed) || errors.Is(err, sarama.ErrTopicAuthorizationFailed) ||
		errors.Is(err, sarama.ErrSASLAuthenticationFailed)
}

// newTask makes the runner of a task newly assigned to this instance.
func (rt *runtime) newTask(id processor.TaskID) *taskRunner { return newTaskRunner(rt, id) }

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

// checkOwnership asks the group coordinator whether this member still holds task t in
// a stable group. It returns a Fenced error when not: the task must be dropped, not
// revived.
func (rt *runtime) checkOwnership(ctx context.Context, sess sarama.ConsumerGroupSession, t *taskRunner) error {
	notOurs := func(why string) error {
		return &taskError{task: t.id, op: "check ownership", rec: taskMigrated, err: errors.New(why)}
	}
	if sess == nil || sess.Context().Err() != nil {
		return notOurs("the group session ended")
	}
	groups, err := rt.admin.DescribeConsumerGroups([]string{rt.cfg.ApplicationID})
	if err != nil || len(groups) != 1 {
		return &taskError{task: t.id, op: "check ownership", rec: settleTxn, err: fmt.Errorf("describe group: %w", err)}
	}
	g := groups[0]
	if !errors.Is(g.Err, sarama.ErrNoError) {
		return &taskError{task: t.id, op: "check ownership", rec: settleTxn, err: fmt.Errorf("describe group: %w", g.Err)}
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
	if !slices.Contains(a.Topics[t.topics[0]], t.id.Partition) {
		return notOurs("assigned to another member")
	}
	return nil
}

// requestRejoin ends the session (once) so the consume loop joins the group again, with
// a subscription that forces a new generation.
func (rt *runtime) requestRejoin(sess sarama.ConsumerGroupSession) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.rejoin != nil && sess != nil && sess.Context().Err() == nil {
		rt.assignor.bumpEpoch()
		select {
		case <-rt.rejoin:
		default:
			close(rt.rejoin)
		}
	}
}

// groupHandler is the sarama.ConsumerGroupHandler of the runtime.
type groupHandler struct {
	rt *runtime
	wg sync.WaitGroup
}

// Setup starts one goroutine per assigned task for this session.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	rt := h.rt
	claimed := map[processor.TaskID]bool{}
	for topic, parts := range sess.Claims() {
		s := rt.topicToSub[topic]
		if s == nil {
			continue
		}
		for _, p := range parts {
			claimed[processor.TaskID{Subtopology: s.ID, Partition: p}] = true
		}
	}
	rt.mu.Lock()
	rt.rejoin = make(chan struct{})
	rt.mu.Unlock()
	ids := make([]processor.TaskID, 0, len(claimed))
	for id := range claimed {
		ids = append(ids, id)
	}
	// OnAssignment made the set the assignment already; this only differs when it did
	// not run (it should always).
	stale, _ := rt.registry.reconcile(ids, nil, rt.newTask)
	for _, t := range stale {
		t.close()
	}
	run := make([]*taskRunner, 0, len(ids))
	for _, id := range ids {
		run = append(run, rt.registry.get(id))
	}
	for _, t := range run {
		t.beginSession(sess)
		h.wg.Go(func() { t.run(sess) })
	}
	rt.sessions.Add(1)
	rt.inSession.Store(true)
	return nil
}

// ConsumeClaim hands the records of one partition to its task until the claim ends.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	t := h.rt.taskFor(claim.Topic(), claim.Partition())
	msgs := claim.Messages()
	if t == nil {
		h.rt.logger.Warn("claim of an unknown task; ignoring its records", "topic", claim.Topic(), "partition", claim.Partition())
	} else {
		t.inbox.start(claim.Topic(), claim.InitialOffset(), claim.HighWaterMarkOffset)
		h.rt.applyOffsetReset(t, claim.Topic(), claim.Partition(), claim.InitialOffset())
		if f := t.inbox.floorOf(claim.Topic()); f > claim.InitialOffset() && claim.InitialOffset() >= 0 {
			t.logger.Warn("the group coordinator answered a committed offset older than the task's own record; skipping the committed records in between",
				"topic", claim.Topic(), "partition", claim.Partition(), "coordinator", claim.InitialOffset(), "recorded", f)
		}
	}
	done := sess.Context().Done()
	h.rt.mu.Lock()
	rejoin := h.rt.rejoin
	h.rt.mu.Unlock()
	var d detacher
	for {
		select {
		case msg, ok := <-msgs:
			if !ok {
				return nil
			}
			if t != nil {
				d.detach(msg)
				t.inbox.push(sess.Context(), msg)
			}
		case <-done:
			return nil
		case <-rejoin:
			// Returning ends the session; the consume loop joins again.
			return nil
		}
	}
}

// Cleanup waits for every task of the session to commit and stop.
func (h *groupHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.rt.inSession.Store(false)
	h.wg.Wait()
	return nil
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
	return s
}

// transactionalID is the producer ID of a task.
func (rt *runtime) transactionalID(id processor.TaskID) string {
	return names.TransactionalID(rt.cfg.ApplicationID, id.String())
}

// sortedTopicsOf returns a sub-topology's resolved source topics, sorted.
func (rt *runtime) sortedTopicsOf(s *graph.Subtopology) []string {
	ts := slices.Clone(s.AllSourceTopics(rt.cfg.ApplicationID))
	sort.Strings(ts)
	return ts
}
