// Package metrics holds eddy's Prometheus metrics. Names follow Prometheus' conventions
// (eddy_ prefix, _total counters, _seconds durations, base units); labels stay
// low-cardinality: task, store, topic, partition, state — never record keys.
//
// A nil *Metrics is valid and records nothing, so the runtime calls it unconditionally.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors of one application instance.
type Metrics struct {
	recordsProcessed                                     *prometheus.CounterVec
	processLatency                                       *prometheus.HistogramVec
	commits                                              *prometheus.CounterVec
	commitLatency                                        *prometheus.HistogramVec
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
		recreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eddy_store_files_recreated_total", Help: "Task store files found damaged (or untrustworthy after a machine crash), moved aside and rebuilt from the changelogs.",
		}, []string{"task"}),
	}
	collectors := []prometheus.Collector{m.recreated, m.dropped, m.cacheHits, m.cacheMisses, m.cacheEvictions, m.cacheFlushes,
		m.recordsProcessed, m.processLatency, m.commits, m.commitLatency, m.aborts, m.fenced,
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
// lookups.
func (m *Metrics) Task(task string) *Task {
	if m == nil {
		return nil
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

// Task holds one task's collectors; a nil *Task records nothing.
type Task struct {
	m         *Metrics
	task      string
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
	if t != nil {
		t.processed.Inc()
		t.latency.Observe(d.Seconds())
	}
}

// Committed records a commit and its duration.
func (t *Task) Committed(d time.Duration) {
	if t != nil {
		t.commits.Inc()
		t.commitLat.Observe(d.Seconds())
	}
}

// Flushed records a store flush of keys dirty keys.
func (t *Task) Flushed(keys int, d time.Duration) {
	if t != nil {
		t.flushKeys.Observe(float64(keys))
		t.flushLat.Observe(d.Seconds())
	}
}

// Aborted records a rolled-back transaction.
func (t *Task) Aborted() {
	if t != nil {
		t.aborts.Inc()
	}
}

// Fenced records the task being dropped as fenced.
func (t *Task) Fenced() {
	if t != nil {
		t.fenced.Inc()
	}
}

// Restoring reports restore progress of a store.
func (t *Task) Restoring(store string, remaining int64, rate float64) {
	if t != nil {
		t.m.restoreRemaining.WithLabelValues(t.task, store).Set(float64(remaining))
		t.m.restoreRate.WithLabelValues(t.task, store).Set(rate)
	}
}

// Restored counts records a restore read.
func (t *Task) Restored(store string, records int64) {
	if t != nil {
		t.m.restored.WithLabelValues(t.task, store).Add(float64(records))
	}
}

// StoreRecreated counts a store file moved aside and rebuilt.
func (t *Task) StoreRecreated() {
	if t != nil {
		t.m.recreated.WithLabelValues(t.task).Inc()
	}
}

// Dropped counts n records dropped for reason ("late").
func (t *Task) Dropped(reason string, n int64) {
	if t != nil && n > 0 {
		t.m.dropped.WithLabelValues(t.task, reason).Add(float64(n))
	}
}

// BadRecord counts a record that could not be deserialized; action is "skipped" or
// "dead_lettered".
func (t *Task) BadRecord(topic, action string) {
	if t != nil {
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
)

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- taskStatesDesc
	ch <- lagDesc
	ch <- bufferDesc
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
}

// CacheStats adds what a table's record cache did since the last call.
func (t *Task) CacheStats(store string, hits, misses, evictions, flushes int64) {
	if t == nil {
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
