// Package task runs one sub-topology on one partition: it instantiates the nodes, routes
// records through them, keeps stream time, fires punctuators and holds the stores. It
// knows nothing of Kafka: the runtime feeds it records and commits around it, and the
// test driver does the same in memory, so both go through the same code.
package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/internal/timestate"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/txproducer"
)

// Collector takes the records the task's sinks (and dead-letter handling) write.
type Collector interface {
	// Send writes a record to topic's partition.
	Send(topic string, partition int32, key, value []byte, headers []processor.Header, ts time.Time) error
	// Partitions returns the partition count of topic.
	Partitions(topic string) (int32, error)
}

// ErrorPolicy says what happens to a record that cannot be deserialized.
type ErrorPolicy int

const (
	// Fail stops the task with an error naming the record (the default).
	Fail ErrorPolicy = iota
	// Skip drops the record with a log line and a metric.
	Skip
	// DeadLetter writes the record, as it was read, to a dead-letter topic with its origin
	// and the error in headers, inside the same transaction, and goes on.
	DeadLetter
)

// Dead-letter headers.
const (
	HeaderDLQTopic     = "eddy.dlq.topic"
	HeaderDLQPartition = "eddy.dlq.partition"
	HeaderDLQOffset    = "eddy.dlq.offset"
	HeaderDLQError     = "eddy.dlq.error"
	HeaderDLQNode      = "eddy.dlq.node"
	HeaderDLQTask      = "eddy.dlq.task"
)

// Config makes a Task.
type Config struct {
	ID            processor.TaskID
	ApplicationID string
	Graph         *graph.Graph
	Subtopology   *graph.Subtopology
	// Stores holds the task's stores; the task registers its sub-topology's stores in it.
	// InMemory stores go to MemoryBackend (made when nil).
	Stores        *kvstore.Set
	MemoryBackend kvstore.Backend
	// StoresRestored says that the caller restores every store with a changelog from it
	// after New and before Init (the runtime does; the test driver, whose changelogs
	// start empty, does not). A window or session store found cut into time segments of
	// another interval (its retention changed: a windowed aggregation's follows its
	// grace) is then emptied, to be rebuilt by that restore; otherwise, and for a store
	// without a changelog, New fails (kvstore.Segmented.Open).
	StoresRestored bool
	Collector      Collector
	Logger         *slog.Logger
	StoreMetrics   kvstore.Metrics
	// GlobalBackend holds the graph's global stores (graph.GlobalStore), which the
	// task's processors read; kept up to date by its owner, never written by the task.
	GlobalBackend kvstore.Backend
	// Now is the wall clock wall-clock punctuators are scheduled against; default
	// time.Now. The test driver moves its own clock.
	Now func() time.Time

	OnDeserializationError ErrorPolicy
	// OnOutputError is what happens to an output record that can never be written (the
	// Collector's Send returns an *OutputError): Fail returns the error, Skip drops the
	// record, DeadLetter writes the input record being processed to DeadLetterTopic
	// (once per input record) and drops the output record.
	OnOutputError ErrorPolicy
	// OnProcessingError is what happens to an input record whose processing failed in a
	// processor's code (an error it returned, or a panic): Fail returns the
	// *ProcessError, Skip goes on with the next record, DeadLetter writes the record to
	// DeadLetterTopic and goes on (Kafka Streams' ProcessingExceptionHandler, KIP-1033).
	OnProcessingError ErrorPolicy
	DeadLetterTopic   string // required with DeadLetter
	// SayWayOut makes a ProcessError that a policy could have gone on past name the
	// eddy.Config setting and its choices (the runtime's tasks; the test driver's
	// errors stay as they were).
	SayWayOut bool
	// OnBadRecord is told of every skipped or dead-lettered record (for metrics).
	OnBadRecord func(policy ErrorPolicy, rec graph.RawRecord, err error)
}

// StoreRebuildMsg is the message of the warning New logs for a store it emptied, to be
// rebuilt from its changelog, because its time segments were cut with another interval
// (the exactly-once harness counts these lines).
const StoreRebuildMsg = "store emptied: its time segments were cut for another retention; it is rebuilt from its changelog"

// Task is one sub-topology on one partition. It is not safe for concurrent use: one
// goroutine owns it.
type Task struct {
	cfg     Config
	ctx     context.Context
	cancel  context.CancelFunc
	logger  *slog.Logger
	nodes   map[string]graph.Instance
	order   []*graph.Node
	sources map[string]graph.SourceInstance // by resolved topic
	stores  map[string]any                  // typed stores by name
	// StoreTopics maps each store to its changelog topic.
	storeTopics map[string]string

	streamTime time.Time
	// partitionTimes are the largest timestamps extracted per source topic, for the
	// sources' timestamp extractors (Kafka Streams' partition time).
	partitionTimes map[string]time.Time
	wallTime       time.Time
	current        *processor.RecordMetadata
	// input is the record being processed, as read (nil outside Process), for a
	// dead-letter of its output's failure; inputDead says it was dead-lettered already.
	input           *graph.RawRecord
	inputDead       bool
	commitRequested bool
	punctuators     []*punctuator
	// committedTime is the time state of the last commit, for Rollback; sealedTime
	// that of the transaction still committing after a Seal (sealed).
	committedTime, sealedTime timeState
	sealed                    bool
	initialized               bool
	closed                    bool
	roundRobin                map[string]int32
	// caches are the record caches of the task's DSL tables, flushed by Flush.
	caches *cache.Registry
	// times is the time state of the task's windowed processors, rolled back with it.
	times *timestate.Registry
	// sinks are the task's sink nodes into stores outside Kafka and their open
	// transactions, which the runtime (or the test driver) prepares, commits, rolls
	// back and recovers around its commit.
	sinks *sinktxn.Registry
}

// New instantiates the sub-topology's nodes and registers its stores. Call Init once the
// stores are restored.
func New(cfg Config) (*Task, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, p := range []ErrorPolicy{cfg.OnDeserializationError, cfg.OnOutputError, cfg.OnProcessingError} {
		switch p {
		case Fail, Skip:
		case DeadLetter:
			if cfg.DeadLetterTopic == "" {
				return nil, fmt.Errorf("task %s: the DeadLetter policy needs a dead-letter topic", cfg.ID)
			}
		default:
			return nil, fmt.Errorf("task %s: unknown error policy %d", cfg.ID, p)
		}
	}
	caches, times := cache.NewRegistry(), &timestate.Registry{}
	var sinkNodes []sinktxn.Node
	for _, n := range cfg.Subtopology.Nodes {
		if n.Sink != nil {
			sinkNodes = append(sinkNodes, *n.Sink)
		}
	}
	sinks := sinktxn.NewRegistry(cfg.ApplicationID, cfg.ID.String(), sinkNodes)
	base := sinktxn.WithRegistry(cache.WithRegistry(context.Background(), caches), sinks)
	ctx, cancel := context.WithCancel(timestate.WithRegistry(base, times))
	t := &Task{
		cfg: cfg, ctx: ctx, cancel: cancel, caches: caches, times: times, sinks: sinks,
		logger:         cfg.Logger.With("task", cfg.ID.String()),
		nodes:          map[string]graph.Instance{},
		sources:        map[string]graph.SourceInstance{},
		stores:         map[string]any{},
		storeTopics:    map[string]string{},
		roundRobin:     map[string]int32{},
		partitionTimes: map[string]time.Time{},
	}
	caches.SetRecordFunc(func(md *processor.RecordMetadata) *processor.RecordMetadata {
		prev := t.current
		t.current = md
		return prev
	})
	for _, st := range cfg.Subtopology.Stores {
		topic := names.ChangelogTopic(cfg.ApplicationID, st.Name)
		var buf *kvstore.Buffer
		var err error
		be := cfg.Stores.Backend()
		if st.InMemory {
			if cfg.MemoryBackend == nil {
				cfg.MemoryBackend = kvstore.NewMemoryBackend()
				t.cfg.MemoryBackend = cfg.MemoryBackend
			}
			be = cfg.MemoryBackend
		}
		if st.Segments != nil {
			spec := *st.Segments
			spec.NoRebuild = !cfg.StoresRestored || (!st.Logged && st.SourceTopic == "")
			seg := kvstore.NewSegmented(be, st.Name, spec)
			// Before anything reads the store (a restore its checkpoint): its segment
			// ids mean something only with the interval they were cut with.
			changed, openErr := seg.Open()
			if openErr != nil {
				cancel()
				return nil, fmt.Errorf("task %s: %w", cfg.ID, openErr)
			}
			if changed != nil {
				t.logger.Warn(StoreRebuildMsg, "store", st.Name, "change", changed.String())
			}
			buf, err = cfg.Stores.RegisterIn(st.Name, st.Logged, seg)
		} else {
			buf, err = cfg.Stores.RegisterIn(st.Name, st.Logged, be)
		}
		if err != nil {
			cancel()
			return nil, err
		}
		t.stores[st.Name] = st.NewTyped(buf, topic, cfg.StoreMetrics)
		t.storeTopics[st.Name] = topic
	}
	if len(cfg.Graph.GlobalStores) > 0 {
		if cfg.GlobalBackend == nil {
			cancel()
			return nil, fmt.Errorf("task %s: the topology has global stores and the task was given none", cfg.ID)
		}
		// A set of the task's own over the global backend: its buffers stay empty (the
		// stores are read-only), so reads go to the backend.
		globals := kvstore.NewSet(cfg.GlobalBackend)
		for _, gs := range cfg.Graph.GlobalStores {
			buf, err := globals.Register(gs.Store.Name, false)
			if err != nil {
				cancel()
				return nil, err
			}
			t.stores[gs.Store.Name] = gs.Store.NewTyped(buf, gs.Topic, cfg.StoreMetrics)
		}
	}
	// Instantiate children before parents: walk nodes in reverse topological order.
	order, err := topoOrder(cfg.Graph, cfg.Subtopology)
	if err != nil {
		cancel()
		return nil, err
	}
	t.order = order
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		children := make([]graph.Instance, len(n.Children))
		for j, c := range n.Children {
			children[j] = t.nodes[c]
		}
		inst, err := n.Factory(t, n, children)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("task %s: %w", cfg.ID, err)
		}
		t.nodes[n.Name] = inst
		if n.Kind == graph.Source {
			for _, topic := range n.TopicNames(cfg.ApplicationID) {
				t.sources[topic] = inst.(graph.SourceInstance)
			}
		}
	}
	return t, nil
}

// topoOrder sorts a sub-topology's nodes so parents come before children.
func topoOrder(g *graph.Graph, s *graph.Subtopology) ([]*graph.Node, error) {
	indeg := map[string]int{}
	for _, n := range s.Nodes {
		indeg[n.Name] = len(n.Parents)
	}
	var queue, out []*graph.Node
	for _, n := range s.Nodes {
		if indeg[n.Name] == 0 {
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		out = append(out, n)
		for _, c := range n.Children {
			indeg[c]--
			if indeg[c] == 0 {
				queue = append(queue, g.Nodes[c])
			}
		}
	}
	if len(out) != len(s.Nodes) {
		return nil, errors.New("task: sub-topology has a cycle")
	}
	return out, nil
}

// ID is the task's ID.
func (t *Task) ID() processor.TaskID { return t.cfg.ID }

// Stores is the task's store set.
func (t *Task) Stores() *kvstore.Set { return t.cfg.Stores }

// ChangelogTopics maps each logged store of the task to its changelog topic.
func (t *Task) ChangelogTopics() map[string]string {
	out := map[string]string{}
	for _, st := range t.cfg.Subtopology.Stores {
		if st.Logged {
			out[st.Name] = t.storeTopics[st.Name]
		}
	}
	return out
}

// SourceTopics lists the (resolved) topics the task reads, sorted.
func (t *Task) SourceTopics() []string {
	out := make([]string, 0, len(t.sources))
	for topic := range t.sources {
		out = append(out, topic)
	}
	sort.Strings(out)
	return out
}

// Init calls every processor's Init, parents first. Call it after restoring the stores.
func (t *Task) Init() error {
	if t.initialized {
		return nil
	}
	t.initialized = true
	for _, n := range t.order {
		if err := t.nodes[n.Name].Init(); err != nil {
			return t.nodeError(err, nil)
		}
	}
	t.Committed()
	return nil
}

// ProcessError stops the application: it names the task, the node and the record.
type ProcessError struct {
	Task   processor.TaskID
	Node   string
	Record *processor.RecordMetadata // nil in a punctuator or Init
	Err    error
	// wayOut says how to go on past the record, when a policy can.
	wayOut string
}

func (e *ProcessError) Error() string {
	where := ""
	if e.Record != nil {
		where = fmt.Sprintf(" at %s/%d offset %d", e.Record.Topic, e.Record.Partition, e.Record.Offset)
	}
	s := fmt.Sprintf("task %s, node %q%s: %v", e.Task, e.Node, where, e.Err)
	if e.wayOut != "" {
		s += "; " + e.wayOut
	}
	return s
}

// The ways out a ProcessError names: a poison pill stopped every instance that got its
// task, and the error said what happened but not what to do (issue 26).
const (
	deserializationWayOut = "every instance that gets this task stops on this record: to go on past such records set Config.OnBadRecord to " +
		"SkipBadRecord (drop them, with a warning and a metric) or DeadLetterBadRecord (write them as read to Config.DeadLetterTopic); " +
		"the default, FailOnBadRecord, stops here"
	processingWayOut = "every instance that gets this task stops on this record: to go on past records a processor fails on set " +
		"Config.OnProcessingError to SkipBadRecord or DeadLetterBadRecord (write them to Config.DeadLetterTopic); the default, FailOnBadRecord, stops here"
)

func (e *ProcessError) Unwrap() error { return e.Err }

func (t *Task) nodeError(err error, md *processor.RecordMetadata) error {
	pe := &ProcessError{Task: t.cfg.ID, Record: md, Err: err}
	// Name the node where the error arose: a NodeError or DeserializationError is made
	// by the failing node itself, so it wins over the punctuator that forwarded to it.
	var ne *graph.NodeError
	var de *graph.DeserializationError
	var pu *punctuatorError
	var ie *graph.InvalidTimestampError
	switch {
	case errors.As(err, &ne):
		pe.Node, pe.Err = ne.Node, ne.Err
		if t.cfg.SayWayOut && md != nil && t.cfg.OnProcessingError == Fail && t.processingPolicyCovers(err) {
			pe.wayOut = processingWayOut
		}
	case errors.As(err, &de):
		pe.Node = de.Node
		if t.cfg.SayWayOut && md != nil && t.cfg.OnDeserializationError == Fail {
			pe.wayOut = deserializationWayOut
		}
	case errors.As(err, &pu):
		pe.Node = pu.node
	case errors.As(err, &ie):
		pe.Node = ie.Node
	}
	return pe
}

// Process runs one record through the sub-topology, then fires the stream-time
// punctuators it made due. The record's topic must be one the task reads.
func (t *Task) Process(rec graph.RawRecord) error {
	src, ok := t.sources[rec.Topic]
	if !ok {
		return fmt.Errorf("task %s: no source reads topic %q", t.cfg.ID, rec.Topic)
	}
	md := processor.RecordMetadata{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	t.current = &md
	t.input, t.inputDead = &rec, false
	defer func() { t.input = nil }()
	// The source stamps the record's (extracted) timestamp on the task (Stamp) before
	// forwarding it; a record that cannot be read, or whose extracted timestamp is
	// negative, reaches no processor and, as in Kafka Streams, moves no time.
	err := src.Deliver(rec, t)
	t.current = nil
	if err != nil {
		var de *graph.DeserializationError
		var ie *graph.InvalidTimestampError
		switch {
		case errors.As(err, &de):
			if err := t.badRecord(rec, de); err != nil {
				return t.nodeError(err, &md)
			}
		case errors.As(err, &ie) && ie.Extracted:
			t.logger.Warn("skipping a record with a negative extracted timestamp",
				"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "node", ie.Node, "timestamp_ms", ie.Timestamp.UnixMilli())
			if t.cfg.OnBadRecord != nil {
				t.cfg.OnBadRecord(Skip, rec, err)
			}
		default:
			if err := t.processingFailed(rec, err); err != nil {
				return t.nodeError(err, &md)
			}
		}
	}
	return t.punctuate(processor.StreamTime, t.streamTime)
}

// PartitionTime implements graph.Clock.
func (t *Task) PartitionTime(topic string) time.Time { return t.partitionTimes[topic] }

// Stamp implements graph.Clock: the record of topic being delivered has timestamp ts.
func (t *Task) Stamp(topic string, ts time.Time) {
	if ts.After(t.streamTime) {
		t.streamTime = ts
	}
	if ts.After(t.partitionTimes[topic]) {
		t.partitionTimes[topic] = ts
	}
}

func (t *Task) badRecord(rec graph.RawRecord, de *graph.DeserializationError) error {
	switch t.cfg.OnDeserializationError {
	case Skip:
		t.logger.Warn("skipping a record that cannot be deserialized",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "node", de.Node, "error", de.Err)
	case DeadLetter:
		if err := t.deadLetter(rec, de.Node, de); err != nil {
			return err
		}
		t.logger.Warn("sent a record that cannot be deserialized to the dead-letter topic", "dlq", t.cfg.DeadLetterTopic,
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "node", de.Node, "error", de.Err)
	default:
		return de
	}
	if t.cfg.OnBadRecord != nil {
		t.cfg.OnBadRecord(t.cfg.OnDeserializationError, rec, de)
	}
	return nil
}

// processingFailed applies Config.OnProcessingError to the failure of rec's processing;
// it returns the error to stop with, or nil to go on with the next record. The policy
// covers the errors of a processor's own code (returned, or a panic: processor.
// ErrPanicked), named by the NodeError of a processor node. A sink's (serializer,
// producer) and the runtime's errors, and any error while the task is closing, are
// returned: skipping a record because its output could not be sent would lose it.
// The record's effects before the failure (records forwarded, stores written) stay, as
// in Kafka Streams.
func (t *Task) processingFailed(rec graph.RawRecord, err error) error {
	if t.cfg.OnProcessingError == Fail || !t.processingPolicyCovers(err) {
		return err
	}
	var ne *graph.NodeError
	errors.As(err, &ne)
	switch t.cfg.OnProcessingError {
	case Skip:
		t.logger.Warn("skipping a record whose processing failed",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "node", ne.Node, "error", ne.Err)
	case DeadLetter:
		if err := t.deadLetter(rec, ne.Node, ne); err != nil {
			return err
		}
		t.logger.Warn("sent a record whose processing failed to the dead-letter topic", "dlq", t.cfg.DeadLetterTopic,
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "node", ne.Node, "error", ne.Err)
	}
	if t.cfg.OnBadRecord != nil {
		t.cfg.OnBadRecord(t.cfg.OnProcessingError, rec, err)
	}
	return nil
}

// processingPolicyCovers reports whether Config.OnProcessingError applies to err: an
// error of a processor node's own code, not a sink's, the producer's or the runtime's,
// while the task is not closing.
func (t *Task) processingPolicyCovers(err error) bool {
	if t.ctx.Err() != nil {
		return false
	}
	var ne *graph.NodeError
	if !errors.As(err, &ne) {
		return false
	}
	if n, ok := t.cfg.Graph.Nodes[ne.Node]; !ok || n.Kind != graph.Processor {
		return false
	}
	var pe *txproducer.Error
	var oe *OutputError
	return !errors.As(err, &pe) && !errors.As(err, &oe)
}

// deadLetter writes rec, as it was read, to the dead-letter topic with its origin, the
// node and the error in headers, into the open transaction.
func (t *Task) deadLetter(rec graph.RawRecord, node string, cause error) error {
	dlq := t.cfg.DeadLetterTopic
	n, err := t.cfg.Collector.Partitions(dlq)
	if err != nil {
		return fmt.Errorf("dead-letter topic %q: %w", dlq, err)
	}
	headers := append(slices.Clone(rec.Headers),
		processor.Header{Key: HeaderDLQTopic, Value: []byte(rec.Topic)},
		processor.Header{Key: HeaderDLQPartition, Value: fmt.Appendf(nil, "%d", rec.Partition)},
		processor.Header{Key: HeaderDLQOffset, Value: fmt.Appendf(nil, "%d", rec.Offset)},
		processor.Header{Key: HeaderDLQNode, Value: []byte(node)},
		processor.Header{Key: HeaderDLQTask, Value: []byte(t.cfg.ID.String())},
		processor.Header{Key: HeaderDLQError, Value: []byte(cause.Error())},
	)
	if err := t.cfg.Collector.Send(dlq, rec.Partition%n, rec.Key, rec.Value, headers, rec.Timestamp); err != nil {
		return fmt.Errorf("dead-letter topic %q: %w", dlq, err)
	}
	return nil
}

// outputFailed applies Config.OnOutputError to an output record of node that can never
// be written; it returns the error to stop with, or nil to go on without the record.
func (t *Task) outputFailed(node string, oe *OutputError) error {
	in := t.input
	switch t.cfg.OnOutputError {
	case Skip:
	case DeadLetter:
		if in == nil {
			break // no input record to write: the output record is dropped
		}
		if !t.inputDead {
			if err := t.deadLetter(*in, node, oe); err != nil {
				return err
			}
			t.inputDead = true
		}
	default:
		return oe
	}
	action, policy := "skipping an output record that can never be written", Skip
	if t.cfg.OnOutputError == DeadLetter && in != nil {
		action, policy = "sent the input record of an output record that can never be written to the dead-letter topic", DeadLetter
	}
	t.logger.Warn(action, "dlq", t.cfg.DeadLetterTopic, "node", node, "output_topic", oe.Topic, "size", oe.Size, "limit", oe.Limit, "error", oe)
	if t.cfg.OnBadRecord != nil {
		rec := graph.RawRecord{Topic: oe.Topic}
		if in != nil {
			rec = *in
		}
		t.cfg.OnBadRecord(policy, rec, oe)
	}
	return nil
}

// Flush forwards what the record caches of the task's tables hold back (each key's
// latest update since the last commit). The runtime calls it at the start of every
// commit, before the changelog records and offsets are written, so the forwards and
// what they cause join the transaction; an error is a processing error (a
// *ProcessError naming the node), recovered from the same way. Rollback drops the
// caches of an aborted transaction.
func (t *Task) Flush() error {
	if err := t.caches.Flush(); err != nil {
		return t.nodeError(err, nil)
	}
	return nil
}

// LateRecords is the number of records the task's windowed aggregations dropped as
// late: the source of eddy_dropped_records_total{reason="late"}.
func (t *Task) LateRecords() int64 { return t.times.LateCount() }

// Sinks is the registry of the task's sinks into stores outside Kafka.
func (t *Task) Sinks() *sinktxn.Registry { return t.sinks }

// Caches is the task's record-cache registry (for tests and metrics).
func (t *Task) Caches() *cache.Registry { return t.caches }

// PunctuateWallClock fires the wall-clock punctuators due at now.
func (t *Task) PunctuateWallClock(now time.Time) error {
	return t.punctuate(processor.WallClockTime, now)
}

// StreamTime is the largest record timestamp seen.
func (t *Task) StreamTime() time.Time { return t.streamTime }

// CommitRequested reports (and clears) a processor's request to commit.
func (t *Task) CommitRequested() bool {
	r := t.commitRequested
	t.commitRequested = false
	return r
}

// Close closes every processor (children first) and ends the task's context. It does not
// close the stores: their owner does, after the last commit.
func (t *Task) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	t.cancel()
	var errs []error
	if t.initialized {
		for i := len(t.order) - 1; i >= 0; i-- {
			if err := t.nodes[t.order[i].Name].Close(); err != nil {
				errs = append(errs, t.nodeError(err, nil))
			}
		}
	}
	return errors.Join(errs...)
}

// graph.Runtime, for node instances.

func (t *Task) TaskID() processor.TaskID { return t.cfg.ID }
func (t *Task) ApplicationID() string    { return t.cfg.ApplicationID }
func (t *Task) RequestCommit()           { t.commitRequested = true }
func (t *Task) Context() context.Context { return t.ctx }

func (t *Task) RecordMetadata() (processor.RecordMetadata, bool) {
	if t.current == nil {
		return processor.RecordMetadata{}, false
	}
	return *t.current, true
}

func (t *Task) Store(name string) (any, error) {
	s, ok := t.stores[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", statestore.ErrUnknownStore, name)
	}
	return s, nil
}

func (t *Task) StoreSpec(name string) *graph.Store { return t.cfg.Graph.Stores[name] }

func (t *Task) GlobalStore(name string) bool {
	st, ok := t.cfg.Graph.Stores[name]
	return ok && st.Global
}

func (t *Task) Logger(node string) *slog.Logger { return t.logger.With("node", node) }

func (t *Task) Send(topic string, p int32, key, value []byte, headers []processor.Header, ts time.Time) error {
	if p < 0 {
		n, err := t.cfg.Collector.Partitions(topic)
		if err != nil {
			return err
		}
		if key == nil {
			p = t.roundRobin[topic] % n
			t.roundRobin[topic]++
		} else {
			p = partition.ForKey(key, n)
		}
	}
	err := t.cfg.Collector.Send(topic, p, key, value, headers, ts)
	var oe *OutputError
	if err != nil && errors.As(err, &oe) {
		return t.outputFailed(t.sinkOf(topic), oe)
	}
	return err
}

// sinkOf names the sink node of the sub-topology that writes to topic, for the
// dead-letter headers and the log.
func (t *Task) sinkOf(topic string) string {
	for _, n := range t.cfg.Subtopology.Nodes {
		if n.Kind == graph.Sink && slices.Contains(n.TopicNames(t.cfg.ApplicationID), topic) {
			return n.Name
		}
	}
	return "sink to " + topic
}

func (t *Task) Partitions(topic string) (int32, error) { return t.cfg.Collector.Partitions(topic) }

// NodeRecords adds to into the records each node of the task has taken since the task
// was made: a source the records delivered to it, a processor those it received, a sink
// those it wrote (replayed records count again). It runs on the task's goroutine.
func (t *Task) NodeRecords(into map[string]int64) {
	for name, inst := range t.nodes {
		if c, ok := inst.(interface{ Records() int64 }); ok {
			into[name] += c.Records()
		}
	}
}
