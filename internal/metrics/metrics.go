// Package metrics holds eddy's Prometheus metrics. Names follow Prometheus' conventions
// (eddy_ prefix, _total counters, _seconds durations, base units); labels stay
// low-cardinality: task, store, topic, partition, state — never record keys.
//
// A nil *Metrics is valid and registers nothing, so the runtime calls it
// unconditionally; its tasks still keep their Live figures, which the operations
// console shows with or without Prometheus.
package metrics

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors of one application instance.
type Metrics struct {
	recordsProcessed                                     *prometheus.CounterVec
	processLatency                                       *prometheus.HistogramVec
	commits                                              *prometheus.CounterVec
	commitLatency                                        *prometheus.HistogramVec
	commitPhase                                          *prometheus.HistogramVec
	overlapRecords                                       prometheus.Counter
	aborts                                               *prometheus.CounterVec
	fenced                                               *prometheus.CounterVec
	restoreRemaining                                     *prometheus.GaugeVec
	restoreRate                                          *prometheus.GaugeVec
	restored                                             *prometheus.CounterVec
	rebalances                                           prometheus.Counter
	flushKeys                                            *prometheus.HistogramVec
	flushLatency                                         *prometheus.HistogramVec
	badRecords                                           *prometheus.CounterVec
	recreated                                            *prometheus.CounterVec
	enforced                                             *prometheus.CounterVec
	dropped                                              *prometheus.CounterVec
	cacheHits, cacheMisses, cacheEvictions, cacheFlushes *prometheus.CounterVec
}

// Snapshot is what the runtime reports on each scrape: states and levels it keeps
// anyway, read when Prometheus asks rather than updated on every record.
type Snapshot struct {
	// AppState is the application's state; States lists all, for a 0/1 gauge each.
	AppState string
	States   []string
	// TaskStates counts tasks per state.
	TaskStates map[string]int
	// Lag lists the records left per source partition of the running tasks.
	Lag []PartitionLag
	// BufferKeys lists the dirty keys waiting in each store's write buffer.
	BufferKeys []StoreLevel
	// StandbyLag lists, per store of each standby replica, the changelog offsets it had
	// left to read at its last read; StandbyAge, per standby (Store empty), the seconds
	// since the start of its last round that read every store to its changelog's end
	// (it holds every change committed before then; absent before its first round).
	StandbyLag []StoreLevel
	StandbyAge []StoreLevel
}

// PartitionLag is the consumer lag of one source partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	Lag       int64
}

// StoreLevel is a level of one store of one task.
type StoreLevel struct {
	Task, Store string
	Value       float64
}

// New registers the collectors on reg (wrap it with prometheus.WrapRegistererWith for
// constant labels). snapshot is called on every scrape.
func New(reg prometheus.Registerer, snapshot func() Snapshot) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	latency := prometheus.ExponentialBuckets(0.000005, 4, 10) // 5µs … 1.3s
	m := &Metrics{
		recordsProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_records_processed_total", Help: "Input records processed, per task.",
		}, []string{"task"}),
		processLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eddy_process_latency_seconds", Help: "Time to run one input record through its sub-topology.", Buckets: latency,
		}, []string{"task"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_commits_total", Help: "Commits (Kafka transactions under exactly-once), per task.",
		}, []string{"task"}),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eddy_commit_latency_seconds", Help: "Time of one commit: changelog records, offsets, transaction commit, store flush.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"task"}),
		commitPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eddy_commit_phase_seconds", Help: "Time of one step of a worker's commit (one transaction for all its tasks), by phase: prepare (record caches, changelog and offsets records, sink pre-commit), flush (waiting for every record in flight), commit (AddOffsetsToTxn, TxnOffsetCommit, EndTxn), stores (the stores' post-commit).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"phase"}),
		overlapRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eddy_commit_overlap_records_total", Help: "Records the workers processed while their last commit's transaction was still committing (Config.OverlapCommits), counted as each commit lands.",
		}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_aborted_transactions_total", Help: "Transactions rolled back and replayed after a producer error, per task.",
		}, []string{"task"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_fenced_tasks_total", Help: "Tasks dropped because another instance owns them now (producer fenced).",
		}, []string{"task"}),
		restoreRemaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eddy_restore_records_remaining", Help: "Changelog offsets left to restore, per task and store.",
		}, []string{"task", "store"}),
		restoreRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eddy_restore_records_per_second", Help: "Rate of the running (or last) restore, per task and store.",
		}, []string{"task", "store"}),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_restored_records_total", Help: "Changelog records read by restores, per task and store.",
		}, []string{"task", "store"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eddy_rebalances_total", Help: "Consumer-group generations this instance joined.",
		}),
		flushKeys: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eddy_store_flush_keys", Help: "Dirty keys written to the local stores by one commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, []string{"task"}),
		flushLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eddy_store_flush_seconds", Help: "Time to write one commit's dirty keys and checkpoints to the local stores.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 11),
		}, []string{"task"}),
		badRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_bad_records_total", Help: "Input records that could not be deserialized, by what was done: skipped or dead_lettered.",
		}, []string{"task", "topic", "action"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_dropped_records_total", Help: "Records dropped by a task's processors, by reason: late (after a window's grace period). Counted at commit; a replayed transaction's drops count again.",
		}, []string{"task", "reason"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_record_cache_hits_total", Help: "Table updates merged into the pending update of their key in the record cache (one forward saved), per task and store.",
		}, []string{"task", "store"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_record_cache_misses_total", Help: "Table updates of a key the record cache did not hold, per task and store.",
		}, []string{"task", "store"}),
		cacheEvictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_record_cache_evictions_total", Help: "Record cache flushes forced by the task's cache byte budget, per task and store.",
		}, []string{"task", "store"}),
		cacheFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_record_cache_flushes_total", Help: "Record cache flushes at commits (of a cache holding entries), per task and store.",
		}, []string{"task", "store"}),
		enforced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_enforced_processing_total", Help: "Times a task processed its other inputs past an empty input partition it had waited for (Config.MaxTaskIdle), once per silence of the partition: records may have been processed out of timestamp order across the task's inputs (Kafka Streams' enforced-processing-total).",
		}, []string{"task", "topic"}),
		recreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_store_files_recreated_total", Help: "Task store files found damaged (or untrustworthy after a machine crash), moved aside and rebuilt from the changelogs.",
		}, []string{"task"}),
	}
	collectors := []prometheus.Collector{m.recreated, m.enforced, m.dropped, m.cacheHits, m.cacheMisses, m.cacheEvictions, m.cacheFlushes,
		m.recordsProcessed, m.processLatency, m.commits, m.commitLatency, m.commitPhase, m.overlapRecords, m.aborts, m.fenced,
		m.restoreRemaining, m.restoreRate, m.restored, m.rebalances, m.flushKeys, m.flushLatency, m.badRecords,
		&snapshotCollector{snapshot: snapshot},
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			for _, r := range collectors {
				reg.Unregister(r)
			}
			return nil, err
		}
	}
	return m, nil
}

// Task returns the collectors of one task, resolved once so the hot path does no label
// lookups. On a nil *Metrics it returns a Task that keeps only its Live figures.
func (m *Metrics) Task(task string) *Task {
	if m == nil {
		return &Task{task: task}
	}
	return &Task{
		m: m, task: task,
		processed: m.recordsProcessed.WithLabelValues(task),
		latency:   m.processLatency.WithLabelValues(task),
		commits:   m.commits.WithLabelValues(task),
		commitLat: m.commitLatency.WithLabelValues(task),
		aborts:    m.aborts.WithLabelValues(task),
		fenced:    m.fenced.WithLabelValues(task),
		flushKeys: m.flushKeys.WithLabelValues(task),
		flushLat:  m.flushLatency.WithLabelValues(task),
	}
}

// Rebalance counts a generation joined.
func (m *Metrics) Rebalance() {
	if m != nil {
		m.rebalances.Inc()
	}
}

// Task holds one task's collectors; a nil *Task records nothing, and a Task of a nil
// *Metrics (m nil) keeps only live.
type Task struct {
	m         *Metrics
	task      string
	live      live
	processed prometheus.Counter
	latency   prometheus.Observer
	commits   prometheus.Counter
	commitLat prometheus.Observer
	aborts    prometheus.Counter
	fenced    prometheus.Counter
	flushKeys prometheus.Observer
	flushLat  prometheus.Observer
}

// Processed records one input record and how long it took.
func (t *Task) Processed(d time.Duration) {
	if t == nil {
		return
	}
	t.live.processed.Add(1)
	if t.m != nil {
		t.processed.Inc()
		t.latency.Observe(d.Seconds())
	}
}

// Committed records a commit and its duration.
func (t *Task) Committed(d time.Duration) {
	if t == nil {
		return
	}
	t.live.commits.Add(1)
	t.live.commitNanos.Add(int64(d))
	t.live.lastCommitDur.Store(int64(d))
	t.live.lastCommit.Store(time.Now().UnixNano())
	if t.m != nil {
		t.commits.Inc()
		t.commitLat.Observe(d.Seconds())
	}
}

// Flushed records a store flush of keys dirty keys.
func (t *Task) Flushed(keys int, d time.Duration) {
	if t != nil && t.m != nil {
		t.flushKeys.Observe(float64(keys))
		t.flushLat.Observe(d.Seconds())
	}
}

// Aborted records a rolled-back transaction.
func (t *Task) Aborted() {
	if t == nil {
		return
	}
	t.live.aborts.Add(1)
	if t.m != nil {
		t.aborts.Inc()
	}
}

// Fenced records the task being dropped as fenced.
func (t *Task) Fenced() {
	if t != nil && t.m != nil {
		t.fenced.Inc()
	}
}

// Restoring reports restore progress of a store: done of total changelog offsets, at
// rate records per second.
func (t *Task) Restoring(store string, done, total int64, rate float64) {
	if t == nil {
		return
	}
	t.live.restoring(store, done, total, rate)
	if t.m != nil {
		t.m.restoreRemaining.WithLabelValues(t.task, store).Set(float64(total - done))
		t.m.restoreRate.WithLabelValues(t.task, store).Set(rate)
	}
}

// Restored counts records a restore read.
func (t *Task) Restored(store string, records int64) {
	if t != nil && t.m != nil {
		t.m.restored.WithLabelValues(t.task, store).Add(float64(records))
	}
}

// StoreRecreated counts a store file moved aside and rebuilt.
func (t *Task) StoreRecreated() {
	if t != nil && t.m != nil {
		t.m.recreated.WithLabelValues(t.task).Inc()
	}
}

// EnforcedProcessing counts the task processing past an empty input partition of topic
// that it had waited for.
func (t *Task) EnforcedProcessing(topic string) {
	if t != nil && t.m != nil {
		t.m.enforced.WithLabelValues(t.task, topic).Inc()
	}
}

// Dropped counts n records dropped for reason ("late").
func (t *Task) Dropped(reason string, n int64) {
	if t == nil || n <= 0 {
		return
	}
	t.live.dropped.Add(n)
	if t.m != nil {
		t.m.dropped.WithLabelValues(t.task, reason).Add(float64(n))
	}
}

// BadRecord counts a record that could not be deserialized; action is "skipped" or
// "dead_lettered".
func (t *Task) BadRecord(topic, action string) {
	if t == nil {
		return
	}
	if action == "dead_lettered" {
		t.live.deadLettered.Add(1)
	} else {
		t.live.skipped.Add(1)
	}
	if t.m != nil {
		t.m.badRecords.WithLabelValues(t.task, topic, action).Inc()
	}
}

// snapshotCollector turns a Snapshot into gauges at scrape time.
type snapshotCollector struct {
	snapshot func() Snapshot
}

var (
	stateDesc      = prometheus.NewDesc("eddy_state", "1 for the application's current state, 0 for the others.", []string{"state"}, nil)
	taskStatesDesc = prometheus.NewDesc("eddy_tasks", "Tasks of this instance, by state.", []string{"state"}, nil)
	lagDesc        = prometheus.NewDesc("eddy_consumer_lag_records", "Records left to process per source partition of the running tasks.", []string{"topic", "partition"}, nil)
	bufferDesc     = prometheus.NewDesc("eddy_store_buffer_keys", "Dirty keys in a store's write buffer, waiting for the next commit.", []string{"task", "store"}, nil)
	standbyLagDesc = prometheus.NewDesc("eddy_standby_lag_offsets", "Changelog offsets a standby replica's store had left to read at its last read (what a promotion would restore, give or take the changes since).", []string{"task", "store"}, nil)
	standbyAgeDesc = prometheus.NewDesc("eddy_standby_caught_up_age_seconds", "Seconds since the start of a standby replica's last round that read every store of its task to its changelog's end: it holds every change committed before then.", []string{"task"}, nil)
)

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- taskStatesDesc
	ch <- lagDesc
	ch <- bufferDesc
	ch <- standbyLagDesc
	ch <- standbyAgeDesc
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for _, st := range s.States {
		v := 0.0
		if st == s.AppState {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, st)
	}
	for st, n := range s.TaskStates {
		ch <- prometheus.MustNewConstMetric(taskStatesDesc, prometheus.GaugeValue, float64(n), st)
	}
	for _, l := range s.Lag {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(l.Lag), l.Topic, strconv.Itoa(int(l.Partition)))
	}
	for _, b := range s.BufferKeys {
		ch <- prometheus.MustNewConstMetric(bufferDesc, prometheus.GaugeValue, b.Value, b.Task, b.Store)
	}
	for _, b := range s.StandbyLag {
		ch <- prometheus.MustNewConstMetric(standbyLagDesc, prometheus.GaugeValue, b.Value, b.Task, b.Store)
	}
	for _, b := range s.StandbyAge {
		ch <- prometheus.MustNewConstMetric(standbyAgeDesc, prometheus.GaugeValue, b.Value, b.Task)
	}
}

// CacheStats adds what a table's record cache did since the last call.
func (t *Task) CacheStats(store string, hits, misses, evictions, flushes int64) {
	if t == nil || t.m == nil {
		return
	}
	for _, c := range []struct {
		v *prometheus.CounterVec
		n int64
	}{{t.m.cacheHits, hits}, {t.m.cacheMisses, misses}, {t.m.cacheEvictions, evictions}, {t.m.cacheFlushes, flushes}} {
		if c.n > 0 {
			c.v.WithLabelValues(t.task, store).Add(float64(c.n))
		}
	}
}

// live holds the figures of a task that the operations console shows: plain atomics,
// kept whether or not Prometheus is configured, so the console needs no registry and
// reads them without gathering every series of every task.
type live struct {
	processed, commits, aborts     atomic.Int64
	commitNanos, lastCommitDur     atomic.Int64
	lastCommit                     atomic.Int64 // UnixNano; 0: none yet
	dropped, deadLettered, skipped atomic.Int64
	restoreMu                      sync.Mutex
	restores                       map[string]RestoreProgress
}

func (l *live) restoring(store string, done, total int64, rate float64) {
	l.restoreMu.Lock()
	defer l.restoreMu.Unlock()
	if l.restores == nil {
		l.restores = map[string]RestoreProgress{}
	}
	l.restores[store] = RestoreProgress{Store: store, Done: done, Total: total, Rate: rate}
}

// RestoreProgress is where the last (or running) restore of a store stands.
type RestoreProgress struct {
	Store       string
	Done, Total int64   // changelog offsets restored, of those to restore
	Rate        float64 // records per second
}

// Live is a task's figures since it was created on this instance.
type Live struct {
	Processed, Commits, Aborts     int64
	CommitTime                     time.Duration // all commits together
	LastCommitTook                 time.Duration
	LastCommit                     time.Time // zero: no commit yet
	Dropped, DeadLettered, Skipped int64
	Restores                       []RestoreProgress // by store name
}

// Live returns the task's figures; a nil *Task has none.
func (t *Task) Live() Live {
	if t == nil {
		return Live{}
	}
	l := &t.live
	out := Live{
		Processed: l.processed.Load(), Commits: l.commits.Load(), Aborts: l.aborts.Load(),
		CommitTime: time.Duration(l.commitNanos.Load()), LastCommitTook: time.Duration(l.lastCommitDur.Load()),
		Dropped: l.dropped.Load(), DeadLettered: l.deadLettered.Load(), Skipped: l.skipped.Load(),
	}
	if ns := l.lastCommit.Load(); ns != 0 {
		out.LastCommit = time.Unix(0, ns)
	}
	l.restoreMu.Lock()
	for _, p := range l.restores {
		out.Restores = append(out.Restores, p)
	}
	l.restoreMu.Unlock()
	slices.SortFunc(out.Restores, func(a, b RestoreProgress) int { return strings.Compare(a.Store, b.Store) })
	return out
}

// Exported reports whether the task's figures go to Prometheus too, for callers that
// gather something only for it.
func (t *Task) Exported() bool { return t != nil && t.m != nil }
