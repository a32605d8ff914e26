package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

// Instance is a node running in one task.
type Instance interface {
	Init() error
	Close() error
}

// SourceInstance is a running source node: it deserializes raw records, gives each its
// timestamp and forwards them.
type SourceInstance interface {
	Instance
	// Deliver deserializes r, extracts its timestamp (the node's extractor, or the
	// record's own), stamps it on clock and forwards the record. A record whose
	// extracted timestamp is negative is dropped with an *InvalidTimestampError, as
	// Kafka Streams' RecordQueue drops it; a negative timestamp of the record itself
	// without an extractor is a fatal *InvalidTimestampError (Kafka Streams' default
	// FailOnInvalidTimestamp).
	Deliver(r RawRecord, clock Clock) error
}

// Clock is the task's record time as a source sees it.
type Clock interface {
	// PartitionTime is the largest timestamp a source extracted from the records of
	// topic (the task's partition of it) so far; zero when none (Kafka Streams'
	// partition time, UNKNOWN = -1).
	PartitionTime(topic string) time.Time
	// Stamp records the timestamp of the record of topic about to be forwarded: it
	// moves partition time and stream time.
	Stamp(topic string, ts time.Time)
}

// TimestampExtractor gives a record read by a source its timestamp; see
// topology.TimestampExtractor.
type TimestampExtractor[K, V any] func(rec processor.Record[K, V], partitionTime time.Time) (time.Time, error)

// OffsetReset is where a source starts reading a partition without a committed offset.
type OffsetReset int

const (
	// ResetDefault is the application's default: the earliest offset.
	ResetDefault OffsetReset = iota
	// ResetEarliest starts at the partition's first record.
	ResetEarliest
	// ResetLatest starts at the partition's end: only records written later are read.
	ResetLatest
)

// InvalidTimestampError reports a record whose timestamp is negative (before the Unix
// epoch, or absent: Kafka's -1, which sarama reads as the zero time).
type InvalidTimestampError struct {
	Node      string
	Timestamp time.Time
	// Extracted is true when the node's extractor gave the timestamp: the record is
	// dropped (Kafka Streams drops it with a warning). False when it is the record's
	// own timestamp and the node has no extractor: the task stops.
	Extracted bool
}

func (e *InvalidTimestampError) Error() string {
	ms := int64(-1)
	if !e.Timestamp.IsZero() {
		ms = e.Timestamp.UnixMilli()
	}
	if e.Extracted {
		return fmt.Sprintf("source %q: the timestamp extractor gave a negative timestamp (%d ms); the record is dropped", e.Node, ms)
	}
	return fmt.Sprintf("source %q: the record has an invalid (negative) timestamp (%d ms): a producer that sets no timestamp, or a topic from before Kafka 0.10, writes such records; "+
		"give the source a timestamp extractor (topology.SourceNode.WithTimestampExtractor, stream.Consume(...).WithTimestamps) that gives them one, or returns a negative time to drop them", e.Node, ms)
}

// negative reports whether ts is a negative Kafka timestamp: before the epoch, or the
// zero time (how sarama reads an absent timestamp, -1).
func negative(ts time.Time) bool { return ts.IsZero() || ts.UnixMilli() < 0 }

// RawRecord is a record as read from Kafka.
type RawRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []processor.Header
	Timestamp time.Time
}

// Factory makes a node's instance for a task, given its children's instances (in the
// order of node.Children).
type Factory func(rt Runtime, node *Node, children []Instance) (Instance, error)

// DeserializationError is returned by a source that cannot deserialize a record.
type DeserializationError struct {
	Node string
	Part string // "key" or "value"
	Err  error
}

func (e *DeserializationError) Error() string {
	return fmt.Sprintf("source %q: cannot deserialize %s: %v", e.Node, e.Part, e.Err)
}

func (e *DeserializationError) Unwrap() error { return e.Err }

// NodeError is an error returned by (or inside) a node: a processor's Process, Init or
// punctuator, or a sink's serializer.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("node %q: %v", e.Node, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }

func wrapNode(node string, err error) error {
	if err == nil {
		return nil
	}
	var ne *NodeError
	if errors.As(err, &ne) {
		return err
	}
	var de *DeserializationError
	if errors.As(err, &de) {
		return err
	}
	return &NodeError{Node: node, Err: err}
}

// receiver is a node instance that takes typed records.
type receiver[K, V any] interface {
	receive(rec processor.Record[K, V]) error
}

func receivers[K, V any](node *Node, children []Instance) ([]receiver[K, V], error) {
	out := make([]receiver[K, V], len(children))
	for i, c := range children {
		r, ok := c.(receiver[K, V])
		if !ok { // the builder checks types; this is a bug, not a user error
			return nil, fmt.Errorf("graph: child %q of %q takes other types than %s forwards", node.Children[i], node.Name, node.Name)
		}
		out[i] = r
	}
	return out, nil
}

// SourceFactory makes source instances deserializing with the given serdes; extract
// gives each record its timestamp (nil: the record's own).
func SourceFactory[K, V any](keys serde.Serde[K], values serde.Serde[V], extract TimestampExtractor[K, V]) Factory {
	return func(rt Runtime, node *Node, children []Instance) (Instance, error) {
		rs, err := receivers[K, V](node, children)
		if err != nil {
			return nil, err
		}
		return &sourceInstance[K, V]{node: node, keys: keys, values: values, extract: extract, children: rs}, nil
	}
}

type sourceInstance[K, V any] struct {
	records  int64 // records delivered, read by the task's goroutine only (Records)
	node     *Node
	keys     serde.Serde[K]
	values   serde.Serde[V]
	extract  TimestampExtractor[K, V]
	children []receiver[K, V]
}

func (s *sourceInstance[K, V]) Init() error  { return nil }
func (s *sourceInstance[K, V]) Close() error { return nil }

func (s *sourceInstance[K, V]) Records() int64 { return s.records }

func (s *sourceInstance[K, V]) Deliver(r RawRecord, clock Clock) error {
	s.records++
	k, err := serdes.Deserialize(s.keys, r.Topic, r.Key)
	if err != nil {
		// A record without a key is common (Kafka's console producer writes them): it
		// arrives with the zero key unless the key serde gives nil a meaning (Nullable).
		// Written back by a sink, the zero key is a key (String's "" is empty bytes, not
		// null); a topology that must keep null keys null uses a Nullable key serde.
		if r.Key != nil || !errors.Is(err, serde.ErrTombstone) {
			return &DeserializationError{Node: s.node.Name, Part: "key", Err: err}
		}
	}
	v, err := serdes.Deserialize(s.values, r.Topic, r.Value)
	if err != nil {
		if r.Value == nil && errors.Is(err, serde.ErrTombstone) {
			err = fmt.Errorf("%w; wrap the value serde with serde.Nullable to accept tombstones", err)
		}
		return &DeserializationError{Node: s.node.Name, Part: "value", Err: err}
	}
	rec := processor.Record[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers}
	if s.extract != nil {
		ts, err := s.extractTimestamp(rec, clock.PartitionTime(r.Topic))
		if err != nil {
			return &DeserializationError{Node: s.node.Name, Part: "timestamp", Err: err}
		}
		if negative(ts) {
			return &InvalidTimestampError{Node: s.node.Name, Timestamp: ts, Extracted: true}
		}
		rec.Timestamp = ts
	} else if negative(r.Timestamp) {
		return &InvalidTimestampError{Node: s.node.Name, Timestamp: r.Timestamp}
	}
	clock.Stamp(r.Topic, rec.Timestamp)
	for _, c := range s.children {
		if err := c.receive(rec); err != nil {
			return err
		}
	}
	return nil
}

// extractTimestamp runs the user's extractor; a panic in it is an error, as in a
// processor.
func (s *sourceInstance[K, V]) extractTimestamp(rec processor.Record[K, V], partitionTime time.Time) (ts time.Time, err error) {
	defer Contain(s.node.Name, &err)
	return s.extract(rec, partitionTime)
}

// ProcessorFactory makes processor instances from a supplier.
func ProcessorFactory[KIn, VIn, KOut, VOut any](supplier processor.Supplier[KIn, VIn, KOut, VOut]) Factory {
	return func(rt Runtime, node *Node, children []Instance) (Instance, error) {
		rs, err := receivers[KOut, VOut](node, children)
		if err != nil {
			return nil, err
		}
		p := supplier()
		if p == nil {
			return nil, &NodeError{Node: node.Name, Err: errors.New("supplier returned a nil processor")}
		}
		return &processorInstance[KIn, VIn, KOut, VOut]{rt: rt, node: node, p: p, children: rs, logger: rt.Logger(node.Name)}, nil
	}
}

type processorInstance[KIn, VIn, KOut, VOut any] struct {
	records  int64 // records received, read by the task's goroutine only (Records)
	rt       Runtime
	node     *Node
	p        processor.Processor[KIn, VIn, KOut, VOut]
	children []receiver[KOut, VOut]
	logger   *slog.Logger
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) Init() (err error) {
	defer Contain(p.node.Name, &err)
	return wrapNode(p.node.Name, p.p.Init(p))
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) Close() (err error) {
	defer Contain(p.node.Name, &err)
	return wrapNode(p.node.Name, p.p.Close())
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) Records() int64 { return p.records }

func (p *processorInstance[KIn, VIn, KOut, VOut]) receive(rec processor.Record[KIn, VIn]) (err error) {
	p.records++
	defer Contain(p.node.Name, &err)
	return wrapNode(p.node.Name, p.p.Process(rec))
}

// Contain turns a panic of user code in node (a processor or a punctuator) into a
// NodeError wrapping processor.ErrPanicked with the panic value and its stack, set in
// *err: the task then stops the application with an error naming the task, the node
// and the record, as for a returned error, instead of crashing the process (and every
// restart after it, on the same record). A panic in a child is contained by the child,
// so the innermost node is named. Deferred directly by the caller.
func Contain(node string, err *error) {
	if r := recover(); r != nil {
		*err = &NodeError{Node: node, Err: fmt.Errorf("%w: %v\n%s", processor.ErrPanicked, r, debug.Stack())}
	}
}

// The processor.Context implementation.

func (p *processorInstance[KIn, VIn, KOut, VOut]) Forward(rec processor.Record[KOut, VOut], children ...string) error {
	if len(children) == 0 {
		for _, c := range p.children {
			if err := c.receive(rec); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range children {
		i := slices.Index(p.node.Children, name)
		if i < 0 {
			return fmt.Errorf("forward: %w %q of %q (children: %v)", processor.ErrUnknownChild, name, p.node.Name, p.node.Children)
		}
		if err := p.children[i].receive(rec); err != nil {
			return err
		}
	}
	return nil
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) StateStore(name string) (any, error) {
	if !slices.Contains(p.node.Stores, name) && !p.rt.GlobalStore(name) {
		return nil, fmt.Errorf("%w: store %q, processor %q (attached: %v)", processor.ErrStoreNotAttached, name, p.node.Name, p.node.Stores)
	}
	return p.rt.Store(name)
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) Schedule(interval time.Duration, typ processor.PunctuationType, fn processor.Punctuator) (processor.Cancellable, error) {
	return p.rt.Schedule(p.node.Name, interval, typ, fn)
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) RecordMetadata() (processor.RecordMetadata, bool) {
	return p.rt.RecordMetadata()
}

func (p *processorInstance[KIn, VIn, KOut, VOut]) TaskID() processor.TaskID { return p.rt.TaskID() }
func (p *processorInstance[KIn, VIn, KOut, VOut]) ApplicationID() string    { return p.rt.ApplicationID() }
func (p *processorInstance[KIn, VIn, KOut, VOut]) NodeName() string         { return p.node.Name }
func (p *processorInstance[KIn, VIn, KOut, VOut]) StreamTime() time.Time    { return p.rt.StreamTime() }
func (p *processorInstance[KIn, VIn, KOut, VOut]) RequestCommit()           { p.rt.RequestCommit() }
func (p *processorInstance[KIn, VIn, KOut, VOut]) Logger() *slog.Logger     { return p.logger }
func (p *processorInstance[KIn, VIn, KOut, VOut]) Context() context.Context { return p.rt.Context() }

// Partitioner chooses the partition of a sink record among n.
type Partitioner[K, V any] func(topic string, key K, value V, n int32) int32

// SinkFactory makes sink instances serializing with the given serdes; partitioner may be
// nil (Kafka's default: murmur2 of the key bytes).
func SinkFactory[K, V any](keys serde.Serde[K], values serde.Serde[V], partitioner Partitioner[K, V]) Factory {
	return func(rt Runtime, node *Node, children []Instance) (Instance, error) {
		return &sinkInstance[K, V]{rt: rt, node: node, topic: node.TopicNames(rt.ApplicationID())[0], keys: keys, values: values, partitioner: partitioner}, nil
	}
}

type sinkInstance[K, V any] struct {
	records     int64 // records written, read by the task's goroutine only (Records)
	rt          Runtime
	node        *Node
	topic       string
	keys        serde.Serde[K]
	values      serde.Serde[V]
	partitioner Partitioner[K, V]
}

func (s *sinkInstance[K, V]) Init() error  { return nil }
func (s *sinkInstance[K, V]) Close() error { return nil }

func (s *sinkInstance[K, V]) Records() int64 { return s.records }

func (s *sinkInstance[K, V]) receive(rec processor.Record[K, V]) error {
	s.records++
	kb, err := s.keys.Serialize(s.topic, rec.Key)
	if err != nil {
		return &NodeError{Node: s.node.Name, Err: err}
	}
	vb, err := s.values.Serialize(s.topic, rec.Value)
	if err != nil {
		return &NodeError{Node: s.node.Name, Err: err}
	}
	partition := int32(-1)
	if s.partitioner != nil {
		n, err := s.rt.Partitions(s.topic)
		if err != nil {
			return &NodeError{Node: s.node.Name, Err: err}
		}
		partition = s.partitioner(s.topic, rec.Key, rec.Value, n)
		if partition < 0 || partition >= n {
			return &NodeError{Node: s.node.Name, Err: fmt.Errorf("partitioner chose partition %d of topic %q, which has %d", partition, s.topic, n)}
		}
	}
	if err := s.rt.Send(s.topic, partition, kb, vb, rec.Headers, rec.Timestamp); err != nil {
		return &NodeError{Node: s.node.Name, Err: err}
	}
	return nil
}
