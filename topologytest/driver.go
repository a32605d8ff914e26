// Package topologytest runs a topology in-process, deterministically, with no broker:
// pipe records into input topics, read what the sinks wrote, read the stores, and move
// wall-clock time by hand. Like Kafka Streams' TopologyTestDriver it commits after every
// record (Config.CommitEvery commits less often, so that the DSL's record caches
// deduplicate table updates as between the runtime's commits), and it runs the same task
// engine and store layers as the real runtime.
//
// Every topic has one partition, so each sub-topology runs as the one task <id>_0.
// Records written to a topic that a sub-topology reads (a repartition topic, or a user
// topic the topology reads back) are processed right after the record that caused them.
//
// A record whose processing fails is rolled back as the runtime's aborted transaction
// would be: what the sinks wrote for it and its store writes are dropped, and the error
// (a *ProcessError naming task, node and offset) is returned. The real runtime then
// stops; the driver stays usable so that a test can go on.
package topologytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// ErrorPolicy says what happens to a record that cannot be deserialized.
type ErrorPolicy = task.ErrorPolicy

// The deserialization error policies.
const (
	// Fail returns the error (a *ProcessError) from the pipe (the default).
	Fail = task.Fail
	// Skip drops the record with a log line.
	Skip = task.Skip
	// DeadLetter writes the record as it was read to Config.DeadLetterTopic with the
	// Header* headers naming its origin and the error, and goes on.
	DeadLetter = task.DeadLetter
)

// Headers of a record sent to the dead-letter topic.
const (
	HeaderDLQTopic     = task.HeaderDLQTopic
	HeaderDLQPartition = task.HeaderDLQPartition
	HeaderDLQOffset    = task.HeaderDLQOffset
	HeaderDLQError     = task.HeaderDLQError
	HeaderDLQNode      = task.HeaderDLQNode
	HeaderDLQTask      = task.HeaderDLQTask
)

// ProcessError is the error of a record or punctuator that failed: it names the task, the
// node and (for a record) its topic, partition and offset.
type ProcessError = task.ProcessError

// Config tunes a Driver; the zero value works.
type Config struct {
	// ApplicationID prefixes internal topics; default "topologytest".
	ApplicationID string
	// StartTime is the initial wall-clock time and the default timestamp of the first
	// record; default 2026-01-01T00:00:00Z.
	StartTime time.Time
	// AutoAdvance is added to the default record timestamp after every piped record
	// without a timestamp of its own; default 0.
	AutoAdvance time.Duration
	// StateDir, when set, keeps persistent stores in bbolt files under it, as the
	// runtime does; by default every store is in memory. A window or session store
	// found there cut into time segments for another retention (a windowed
	// aggregation's grace changed) makes New fail: the runtime rebuilds such a store
	// from its changelog, and a new driver's changelogs start empty.
	StateDir string
	// Logger receives the tasks' logs; default discards them.
	Logger *slog.Logger
	// OnDeserializationError: what to do with a record that cannot be deserialized
	// (default Fail: the pipe returns the error); DeadLetterTopic names the topic for
	// DeadLetter.
	OnDeserializationError ErrorPolicy
	// OnProcessingError: what to do with a record whose processing failed in a
	// processor's code (eddy.Config.OnProcessingError; default Fail).
	OnProcessingError ErrorPolicy
	DeadLetterTopic   string
	// CommitEvery commits after every CommitEvery piped records (and what they cause)
	// instead of after each one (0 or 1, as Kafka Streams' TopologyTestDriver); Commit
	// commits at once. Between commits the DSL tables' record caches hold their updates
	// back, one per key, as between the runtime's commits (commit.interval). A failure
	// then aborts the whole open transaction: the records piped since the last commit
	// stay in their topics, but what they caused (outputs, store writes, cached
	// updates, stream time) is dropped, and the driver goes on from the last commit —
	// where the runtime would process them again (pipe them again to do the same).
	CommitEvery int
}

// Record is a record as stored in a topic of the driver.
type Record struct {
	Topic     string
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []processor.Header
	Timestamp time.Time
}

// Driver runs a topology in memory. It is not safe for concurrent use.
type Driver struct {
	cfg      Config
	topo     *topology.Topology
	tasks    []*task.Task
	byTopic  map[string]*task.Task // topic → task reading it
	topics   map[string][]Record   // everything written, per topic
	read     map[string]int        // per topic: records already returned by an OutputTopic
	queue    []Record              // records written to topics the topology reads, not processed yet
	wall     time.Time
	nextTime time.Time
	sets     []*kvstore.Set
	// global holds the global stores; globalTopics maps each one's topic to it.
	global       kvstore.Backend
	globalTopics map[string]*graph.GlobalStore
	closed       bool
	// tx is the open transaction of every task under CommitEvery > 1; nil when none.
	tx *openTx
	// sinkNonce names the sink transactions of the commit under way; it changes at
	// every commit and abort.
	sinkNonce uint64
}

// openTx is a transaction spanning several piped records (Config.CommitEvery).
type openTx struct {
	lengths map[string]int // every topic's length when it began
	inputs  []Record       // the records piped since
}

// New starts a driver for topo: it makes one task per sub-topology and initialises its
// processors.
func New(topo *topology.Topology, cfg Config) (*Driver, error) {
	if cfg.ApplicationID == "" {
		cfg.ApplicationID = "topologytest"
	}
	if cfg.StartTime.IsZero() {
		cfg.StartTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Driver{
		cfg: cfg, topo: topo, sinkNonce: 1,
		byTopic: map[string]*task.Task{}, topics: map[string][]Record{}, read: map[string]int{},
		wall: cfg.StartTime, nextTime: cfg.StartTime,
	}
	g := graph.Of(topo)
	if len(g.GlobalStores) > 0 {
		d.globalTopics = map[string]*graph.GlobalStore{}
		for _, gs := range g.GlobalStores {
			d.globalTopics[gs.Topic] = gs
		}
		d.global = kvstore.NewMemoryBackend()
		if cfg.StateDir != "" {
			b, err := kvstore.OpenBolt(filepath.Join(cfg.StateDir, cfg.ApplicationID, "global"), kvstore.BoltOptions{Logger: cfg.Logger})
			if err != nil {
				return nil, err
			}
			d.global = b
		}
	}
	for _, sub := range g.Subtopologies {
		id := processor.TaskID{Subtopology: sub.ID, Partition: 0}
		var backend kvstore.Backend = kvstore.NewMemoryBackend()
		if cfg.StateDir != "" {
			b, err := kvstore.OpenBolt(filepath.Join(cfg.StateDir, cfg.ApplicationID, id.String()), kvstore.BoltOptions{Logger: cfg.Logger})
			if err != nil {
				d.Close()
				return nil, err
			}
			backend = b
		}
		set := kvstore.NewSet(backend)
		d.sets = append(d.sets, set)
		t, err := task.New(task.Config{
			ID: id, ApplicationID: cfg.ApplicationID, Graph: g, Subtopology: sub,
			Stores: set, GlobalBackend: d.global, Collector: (*collector)(d), Logger: cfg.Logger,
			Now:                    func() time.Time { return d.wall },
			OnDeserializationError: cfg.OnDeserializationError, OnProcessingError: cfg.OnProcessingError, DeadLetterTopic: cfg.DeadLetterTopic,
		})
		if err != nil {
			d.Close()
			return nil, err
		}
		// A sink outside Kafka gets a transaction per commit, named by a nonce of the
		// driver's (the runtime's is its Kafka transaction's).
		t.Sinks().SetNonce(func() uint64 { return d.sinkNonce })
		d.tasks = append(d.tasks, t)
		for _, topic := range t.SourceTopics() {
			d.byTopic[topic] = t
		}
	}
	// A persistent store found on disk is restored from the driver's (empty) changelogs:
	// it is kept as it is, as the runtime would after a clean shutdown.
	for _, t := range d.tasks {
		if err := t.Init(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// Close closes every task and store.
func (d *Driver) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, t := range d.tasks {
		errs = append(errs, t.Close())
	}
	for _, s := range d.sets {
		errs = append(errs, s.Close())
	}
	if d.global != nil {
		errs = append(errs, d.global.Close())
	}
	return errors.Join(errs...)
}

// PipeRaw writes a serialized record to topic and processes it, and every record it
// causes, to the end; ts zero means the driver's next default timestamp.
func (d *Driver) PipeRaw(topic string, key, value []byte, headers []processor.Header, ts time.Time) error {
	if d.closed {
		return errors.New("topologytest: driver is closed")
	}
	gs, global := d.globalTopics[topic]
	if _, ok := d.byTopic[topic]; !ok && !global {
		return fmt.Errorf("topologytest: no source reads topic %q (sources read: %s)", topic, strings.Join(d.inputTopics(), ", "))
	}
	if ts.IsZero() {
		ts = d.nextTime
		d.nextTime = d.nextTime.Add(d.cfg.AutoAdvance)
	}
	if global {
		// As Kafka Streams' TopologyTestDriver: a record of a global store's topic
		// updates the store at once, before the next record is piped.
		d.append(topic, key, value, headers, ts)
		recs := d.topics[topic]
		rec := recs[len(recs)-1]
		return d.updateGlobal(gs, graph.RawRecord{Topic: topic, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp})
	}
	if d.cfg.CommitEvery > 1 {
		return d.pipeInTransaction(topic, key, value, headers, ts)
	}
	d.append(topic, key, value, headers, ts)
	return d.drain()
}

// pipeInTransaction processes a piped record in the open transaction of every task,
// which commits after CommitEvery records.
func (d *Driver) pipeInTransaction(topic string, key, value []byte, headers []processor.Header, ts time.Time) error {
	if d.tx == nil {
		d.tx = &openTx{lengths: make(map[string]int, len(d.topics))}
		for topic, recs := range d.topics {
			d.tx.lengths[topic] = len(recs)
		}
	}
	d.append(topic, key, value, headers, ts)
	recs := d.topics[topic]
	d.tx.inputs = append(d.tx.inputs, recs[len(recs)-1])
	if err := d.drainOpen(); err != nil {
		return d.abort(err)
	}
	if len(d.tx.inputs) >= d.cfg.CommitEvery {
		return d.Commit()
	}
	return nil
}

// drainOpen processes the queued records in the open transaction.
func (d *Driver) drainOpen() error {
	for len(d.queue) > 0 {
		rec := d.queue[0]
		d.queue = d.queue[1:]
		t := d.byTopic[rec.Topic]
		if err := t.Process(graph.RawRecord{Topic: rec.Topic, Partition: 0, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp}); err != nil {
			return err
		}
	}
	return nil
}

// Commit commits the open transaction (Config.CommitEvery): the tables' record caches
// forward what they hold, and what that causes is processed, then every task's changelog
// records are written and its stores flushed. Without CommitEvery every record is
// committed as it is processed, and Commit has nothing to do.
func (d *Driver) Commit() error {
	if d.closed {
		return errors.New("topologytest: driver is closed")
	}
	if d.tx == nil {
		return nil
	}
	// A task's flush may send records to another task (a repartition topic), whose
	// caches then fill: repeat until nothing is held back or queued.
	for {
		for _, t := range d.tasks {
			if err := t.Flush(); err != nil {
				return d.abort(err)
			}
			if err := d.drainOpen(); err != nil {
				return d.abort(err)
			}
		}
		held := false
		for _, t := range d.tasks {
			held = held || t.Caches().Bytes() > 0
		}
		if !held {
			break
		}
	}
	for _, t := range d.tasks {
		if err := d.commitStores(t); err != nil {
			return d.abort(err)
		}
		t.Committed()
	}
	d.tx = nil
	return nil
}

// abort drops the open transaction: the topics go back to their lengths when it began
// (the piped records are written again, unprocessed), the store buffers and record
// caches are discarded and the tasks' time goes back to their last commit.
func (d *Driver) abort(cause error) error {
	for _, t := range d.tasks {
		t.Stores().Discard()
		d.rollbackSinks(t)
		t.Rollback()
	}
	for topic, recs := range d.topics {
		d.topics[topic] = recs[:d.tx.lengths[topic]]
	}
	for _, in := range d.tx.inputs {
		in.Offset = int64(len(d.topics[in.Topic]))
		d.topics[in.Topic] = append(d.topics[in.Topic], in)
	}
	d.queue = nil
	d.tx = nil
	return cause
}

// drain processes the queued records, and those they cause, in order.
func (d *Driver) drain() error {
	for len(d.queue) > 0 {
		rec := d.queue[0]
		d.queue = d.queue[1:]
		if err := d.process(rec); err != nil {
			d.queue = nil
			return err
		}
	}
	return nil
}

// updateGlobal applies a record of a global store's topic to the store, with the
// topic's offset as its checkpoint, as the runtime does.
func (d *Driver) updateGlobal(gs *graph.GlobalStore, rec graph.RawRecord) error {
	k, v, skip, err := gs.Entry(rec)
	if err != nil {
		return fmt.Errorf("topologytest: topic %q offset %d: %w", rec.Topic, rec.Offset, err)
	}
	batch := kvstore.Batch{Checkpoints: map[string]int64{names.GlobalCheckpoint(gs.Store.Name, rec.Partition): rec.Offset + 1}}
	if !skip {
		batch.Writes = map[string][]kvstore.Entry{gs.Store.Name: {{Key: k, Value: v}}}
	}
	return d.global.Write(batch)
}

func (d *Driver) inputTopics() []string {
	var out []string
	for t := range d.byTopic {
		out = append(out, t)
	}
	for t := range d.globalTopics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func (d *Driver) append(topic string, key, value []byte, headers []processor.Header, ts time.Time) {
	rec := Record{Topic: topic, Offset: int64(len(d.topics[topic])), Key: key, Value: value, Headers: headers, Timestamp: ts}
	d.topics[topic] = append(d.topics[topic], rec)
	if _, ok := d.byTopic[topic]; ok {
		d.queue = append(d.queue, rec)
	}
}

func (d *Driver) process(rec Record) error {
	t := d.byTopic[rec.Topic]
	return d.transaction(t, func() error {
		return t.Process(graph.RawRecord{Topic: rec.Topic, Partition: 0, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp})
	})
}

// transaction runs fn as the runtime runs a batch of a task's work in a Kafka
// transaction: on success it commits; on failure it aborts, so the records written
// meanwhile disappear and the store buffers are discarded.
func (d *Driver) transaction(t *task.Task, fn func() error) error {
	lengths := make(map[string]int, len(d.topics))
	for topic, recs := range d.topics {
		lengths[topic] = len(recs)
	}
	queued := len(d.queue)
	err := fn()
	if err == nil {
		err = d.commit(t)
	}
	if err == nil && d.tx == nil {
		t.Committed()
	}
	if err != nil {
		t.Stores().Discard()
		d.rollbackSinks(t)
		t.Rollback() // time state and record caches, as the runtime after an abort
		for topic, recs := range d.topics {
			d.topics[topic] = recs[:lengths[topic]]
		}
		d.queue = d.queue[:queued]
	}
	return err
}

// rollbackSinks rolls back the task's sink transactions of the aborted commit.
func (d *Driver) rollbackSinks(t *task.Task) {
	if err := t.Sinks().Rollback(context.Background()); err != nil {
		d.cfg.Logger.Warn("topologytest: rolling back a sink transaction failed", "error", err)
	}
	d.sinkNonce++
}

// commit forwards what the task's record caches hold, writes the task's changelog
// records into the driver's changelog topics and then flushes the stores with the
// checkpoints, as the runtime does around its transaction.
func (d *Driver) commit(t *task.Task) error {
	if d.tx != nil {
		return d.Commit() // a store written by a test joins the open transaction
	}
	if err := t.Flush(); err != nil {
		return err
	}
	return d.commitStores(t)
}

// commitStores commits the task's work as the runtime does around its Kafka
// transaction: its sinks outside Kafka pre-commit, its changelog records are written,
// its stores flushed, and its sinks' transactions committed.
func (d *Driver) commitStores(t *task.Task) error {
	ctx := context.Background()
	if err := t.Sinks().Prepare(ctx); err != nil {
		return err
	}
	if err := d.writeStores(t); err != nil {
		return err
	}
	t.Sinks().Committed()
	d.sinkNonce++
	if err := t.Sinks().Finish(ctx); err != nil {
		return fmt.Errorf("topologytest: %w (the runtime retries this until it commits; the driver stops here)", err)
	}
	return nil
}

// writeStores writes the task's changelog records and flushes its stores.
func (d *Driver) writeStores(t *task.Task) error {
	topics := t.ChangelogTopics()
	lw := &changelogWriter{d: d, topics: topics, last: map[string]int64{}}
	if err := t.Stores().LogChanges(lw); err != nil {
		return err
	}
	checkpoints := map[string]int64{}
	for store, off := range lw.last {
		checkpoints[store] = off + 1
	}
	return t.Stores().Flush(checkpoints)
}

type changelogWriter struct {
	d      *Driver
	topics map[string]string
	last   map[string]int64
}

func (w *changelogWriter) WriteChange(store string, key, value []byte) error {
	topic := w.topics[store]
	w.d.topics[topic] = append(w.d.topics[topic], Record{Topic: topic, Offset: int64(len(w.d.topics[topic])), Key: slices.Clone(key), Value: slices.Clone(value), Timestamp: w.d.wall})
	w.last[store] = int64(len(w.d.topics[topic]) - 1)
	return nil
}

// AdvanceWallClock moves wall-clock time forward by dt and fires the wall-clock
// punctuators that became due, committing each task after.
func (d *Driver) AdvanceWallClock(dt time.Duration) error {
	if dt < 0 {
		return fmt.Errorf("topologytest: cannot move wall-clock time back (%v)", dt)
	}
	if d.closed {
		return errors.New("topologytest: driver is closed")
	}
	if err := d.Commit(); err != nil {
		return err
	}
	d.wall = d.wall.Add(dt)
	for _, t := range d.tasks {
		if err := d.transaction(t, func() error { return t.PunctuateWallClock(d.wall) }); err != nil {
			d.queue = nil
			return err
		}
		if err := d.drain(); err != nil {
			return err
		}
	}
	return nil
}

// WallClock is the driver's current wall-clock time.
func (d *Driver) WallClock() time.Time { return d.wall }

// Records returns every record written to topic so far (input, output, changelog and
// repartition topics alike; internal topics by their full name).
func (d *Driver) Records(topic string) []Record { return slices.Clone(d.topics[topic]) }

// ChangelogTopic is the name of a store's changelog topic in this driver.
func (d *Driver) ChangelogTopic(store string) string {
	return names.ChangelogTopic(d.cfg.ApplicationID, store)
}

// collector is the driver as the tasks' Collector.
type collector Driver

func (c *collector) Send(topic string, partition int32, key, value []byte, headers []processor.Header, ts time.Time) error {
	if partition != 0 {
		return fmt.Errorf("topologytest: partition %d of topic %q: the driver's topics have one partition", partition, topic)
	}
	(*Driver)(c).append(topic, slices.Clone(key), slices.Clone(value), slices.Clone(headers), ts)
	return nil
}

func (c *collector) Partitions(string) (int32, error) { return 1, nil }

// InputTopic pipes typed records into a topic.
type InputTopic[K, V any] struct {
	d      *Driver
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// NewInputTopic returns a typed writer for topic.
func NewInputTopic[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *InputTopic[K, V] {
	return &InputTopic[K, V]{d: d, topic: topic, keys: keys, values: values}
}

// Pipe writes one record with the driver's next default timestamp and processes it.
func (in *InputTopic[K, V]) Pipe(key K, value V) error {
	return in.PipeAt(key, value, time.Time{})
}

// PipeAt writes one record with timestamp ts and processes it.
func (in *InputTopic[K, V]) PipeAt(key K, value V, ts time.Time) error {
	kb, err := in.keys.Serialize(in.topic, key)
	if err != nil {
		return err
	}
	vb, err := in.values.Serialize(in.topic, value)
	if err != nil {
		return err
	}
	return in.d.PipeRaw(in.topic, kb, vb, nil, ts)
}

// PipeValues writes records with no key (nil key bytes), one per value.
func (in *InputTopic[K, V]) PipeValues(values ...V) error {
	for _, v := range values {
		vb, err := in.values.Serialize(in.topic, v)
		if err != nil {
			return err
		}
		if err := in.d.PipeRaw(in.topic, nil, vb, nil, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

// OutputTopic reads typed records from a topic.
type OutputTopic[K, V any] struct {
	d      *Driver
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// NewOutputTopic returns a typed reader of topic.
func NewOutputTopic[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *OutputTopic[K, V] {
	return &OutputTopic[K, V]{d: d, topic: topic, keys: keys, values: values}
}

// ReadRecords returns the records written since the last read, and marks them read.
func (out *OutputTopic[K, V]) ReadRecords() ([]processor.Record[K, V], error) {
	all := out.d.topics[out.topic]
	start := out.d.read[out.topic]
	var recs []processor.Record[K, V]
	for _, r := range all[start:] {
		k, err := out.keys.Deserialize(out.topic, r.Key)
		if err != nil {
			return nil, fmt.Errorf("topologytest: topic %q offset %d: %w", out.topic, r.Offset, err)
		}
		v, err := out.values.Deserialize(out.topic, r.Value)
		if err != nil {
			return nil, fmt.Errorf("topologytest: topic %q offset %d: %w", out.topic, r.Offset, err)
		}
		recs = append(recs, processor.Record[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
	}
	out.d.read[out.topic] = len(all)
	return recs, nil
}

// ReadKeyValueMap reads the unread records and returns the last value per key, as a
// compacted topic would keep: a tombstone (a record with a nil value) removes its key.
// Keys are rendered as strings: a string as it is, []byte as its bytes, a pointer as
// what it points to ("<nil>" for nil), anything else with fmt.Sprint.
func (out *OutputTopic[K, V]) ReadKeyValueMap() (map[string]V, error) {
	start := out.d.read[out.topic]
	recs, err := out.ReadRecords()
	if err != nil {
		return nil, err
	}
	raw := out.d.topics[out.topic][start:]
	m := map[string]V{}
	for i, r := range recs {
		k := keyString(r.Key)
		if raw[i].Value == nil {
			delete(m, k)
			continue
		}
		m[k] = r.Value
	}
	return m, nil
}

func keyString(k any) string {
	switch v := k.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	rv := reflect.ValueOf(k)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "<nil>"
		}
		return keyString(rv.Elem().Interface())
	}
	return fmt.Sprint(k)
}

// KeyValueStore returns a store of the topology for reading and, in tests, writing.
// Each write made through it is committed at once (changelog, then backend), as if a
// processor had made it in a record of its own.
func KeyValueStore[K, V any](d *Driver, name string) (statestore.KeyValueStore[K, V], error) {
	for _, t := range d.tasks {
		s, err := t.Store(name)
		if err != nil {
			continue
		}
		kv, ok := s.(statestore.KeyValueStore[K, V])
		if !ok {
			return nil, fmt.Errorf("topologytest: store %q is a %T, not a KeyValueStore[%v, %v] (the types given to topology.AddKeyValueStore)", name, s, reflect.TypeFor[K](), reflect.TypeFor[V]())
		}
		return &committingStore[K, V]{KeyValueStore: kv, d: d, t: t}, nil
	}
	return nil, fmt.Errorf("topologytest: %w: %q", statestore.ErrUnknownStore, name)
}

// committingStore commits its task after every write, so that writes a test makes
// between records neither wait for nor depend on the next record of that task.
type committingStore[K, V any] struct {
	statestore.KeyValueStore[K, V]
	d *Driver
	t *task.Task
}

func (s *committingStore[K, V]) commit(err error) error {
	if err != nil {
		s.t.Stores().Discard()
		return err
	}
	if err := s.d.commit(s.t); err != nil {
		s.t.Stores().Discard()
		return err
	}
	return nil
}

func (s *committingStore[K, V]) Put(k K, v V) error {
	return s.commit(s.KeyValueStore.Put(k, v))
}

func (s *committingStore[K, V]) PutIfAbsent(k K, v V) (V, bool, error) {
	old, existed, err := s.KeyValueStore.PutIfAbsent(k, v)
	return old, existed, s.commit(err)
}

func (s *committingStore[K, V]) Delete(k K) error {
	return s.commit(s.KeyValueStore.Delete(k))
}
