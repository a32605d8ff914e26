// Package processor is the API a node of a topology is written in.
//
// A Processor receives typed records one at a time, may read and write the state stores
// attached to it, and forwards records to its children through its Context. One instance
// runs per task (one sub-topology on one partition), always on one goroutine, so a
// processor needs no locks.
//
//	type counter struct {
//		ctx    processor.Context[string, int64]
//		counts statestore.KeyValueStore[string, int64]
//	}
//
//	func (c *counter) Init(ctx processor.Context[string, int64]) (err error) {
//		c.ctx = ctx
//		c.counts, err = processor.KeyValueStore[string, int64](ctx, "counts")
//		return err
//	}
//
//	func (c *counter) Process(rec processor.Record[string, string]) error {
//		n, _, err := c.counts.Get(rec.Key)
//		...
//		return c.ctx.Forward(processor.Record[string, int64]{Key: rec.Key, Value: n + 1, Timestamp: rec.Timestamp})
//	}
//
// Stateless steps need no struct: Map, MapValues, Filter, FlatMap and ForEach build
// processors from a function.
package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/eddy-streams/eddy/statestore"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a typed key-value record with its timestamp and headers.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []Header
}

// WithValue returns a copy of r carrying another value (of possibly another type).
func WithValue[K, V, V2 any](r Record[K, V], v V2) Record[K, V2] {
	return Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers}
}

// WithKeyValue returns a copy of r carrying another key and value.
func WithKeyValue[K, V, K2, V2 any](r Record[K, V], k K2, v V2) Record[K2, V2] {
	return Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers}
}

// Processor is a node of a topology: it takes records of (KIn, VIn) and forwards records
// of (KOut, VOut). Init is called once before the first record, Close once when the task
// closes. An error returned from Init, Process or a punctuator stops the application and
// names the task, node and record offset; nothing past that record is committed.
type Processor[KIn, VIn, KOut, VOut any] interface {
	Init(ctx Context[KOut, VOut]) error
	Process(rec Record[KIn, VIn]) error
	Close() error
}

// Supplier makes a new Processor. It is called once per task, so processors of different
// tasks share nothing.
type Supplier[KIn, VIn, KOut, VOut any] func() Processor[KIn, VIn, KOut, VOut]

// TaskID names a task: sub-topology Subtopology on partition Partition of its source
// topics. Its string form is "<subtopology>_<partition>", as in Kafka Streams.
type TaskID struct {
	Subtopology int
	Partition   int32
}

func (t TaskID) String() string { return fmt.Sprintf("%d_%d", t.Subtopology, t.Partition) }

// ParseTaskID parses the "<subtopology>_<partition>" form.
func ParseTaskID(s string) (TaskID, error) {
	var t TaskID
	if _, err := fmt.Sscanf(s, "%d_%d", &t.Subtopology, &t.Partition); err != nil || t.String() != s || t.Subtopology < 0 || t.Partition < 0 {
		return TaskID{}, fmt.Errorf("processor: bad task ID %q: want <subtopology>_<partition>", s)
	}
	return t, nil
}

// RecordMetadata says where the record being processed came from.
type RecordMetadata struct {
	Topic     string
	Partition int32
	Offset    int64
}

// PunctuationType says which clock drives a scheduled function.
type PunctuationType int

const (
	// StreamTime punctuators fire as record timestamps advance, so they replay
	// deterministically; they do not fire while no records arrive.
	StreamTime PunctuationType = iota
	// WallClockTime punctuators fire as the system clock advances.
	WallClockTime
)

func (p PunctuationType) String() string {
	if p == WallClockTime {
		return "wall-clock"
	}
	return "stream-time"
}

// Punctuator is called by Schedule with the time (of its clock) at which it fires.
type Punctuator func(now time.Time) error

// Cancellable stops a scheduled punctuator.
type Cancellable interface{ Cancel() }

// Context is what a processor sees of its task. It is valid from Init until Close and
// must only be used on the goroutine that calls the processor.
type Context[K, V any] interface {
	StoreProvider

	// Forward sends a record to every child of this node, or only to the named children.
	// It returns the first error a child returns.
	Forward(rec Record[K, V], children ...string) error
	// Schedule calls fn every interval of the given clock until cancelled or the task
	// closes, as Kafka Streams does: a StreamTime punctuator is aligned to multiples of
	// interval since the Unix epoch and first fires at the first record; a WallClockTime
	// one first fires one interval after Schedule. Either fires once, not once per
	// missed interval, when its clock jumps. fn gets the clock's current time; what it
	// forwards and writes is committed like the output of a record.
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error)
	// RecordMetadata describes the record being processed; ok is false inside a
	// punctuator, where no record is.
	RecordMetadata() (md RecordMetadata, ok bool)
	// TaskID names this task.
	TaskID() TaskID
	// ApplicationID names the application.
	ApplicationID() string
	// NodeName is this processor's name in the topology.
	NodeName() string
	// StreamTime is the largest record timestamp the task has seen.
	StreamTime() time.Time
	// RequestCommit asks for a commit after the current record.
	RequestCommit()
	// Logger is a logger that names the task and node.
	Logger() *slog.Logger
	// Context is cancelled when the task closes.
	Context() context.Context
}

// StoreProvider gives access to the state stores attached to a node. Use the typed
// KeyValueStore function rather than calling it directly.
type StoreProvider interface {
	StateStore(name string) (any, error)
}

// ErrStoreNotAttached is returned for a store that exists nowhere or is not attached to
// the asking node.
var ErrStoreNotAttached = errors.New("state store not attached to this processor")

// ErrPanicked is wrapped by the error that stops the application when a processor's
// Init, Process, Close or punctuator panicked: the panic is turned into an error that
// names the task, the node and the record, and nothing past the record is committed.
var ErrPanicked = errors.New("panicked")

// ErrUnknownChild is returned by Forward for a name that is not a child of the node.
var ErrUnknownChild = errors.New("unknown child")

// KeyValueStore returns the key-value store name attached to this processor, typed.
func KeyValueStore[K, V any](p StoreProvider, name string) (statestore.KeyValueStore[K, V], error) {
	s, err := p.StateStore(name)
	if err != nil {
		return nil, err
	}
	kv, ok := s.(statestore.KeyValueStore[K, V])
	if !ok {
		return nil, fmt.Errorf("processor: state store %q is a %T, not a KeyValueStore[%v, %v] (key and value types must be those given to topology.AddKeyValueStore)", name, s, reflect.TypeFor[K](), reflect.TypeFor[V]())
	}
	return kv, nil
}

// WindowStore returns the window store name (added with topology.AddWindowStore) of the
// node's task.
func WindowStore[K, V any](p StoreProvider, name string) (statestore.WindowStore[K, V], error) {
	return typedStore[statestore.WindowStore[K, V]](p, name, "WindowStore", "topology.AddWindowStore")
}

// SessionStore returns the session store name (added with topology.AddSessionStore) of
// the node's task.
func SessionStore[K, V any](p StoreProvider, name string) (statestore.SessionStore[K, V], error) {
	return typedStore[statestore.SessionStore[K, V]](p, name, "SessionStore", "topology.AddSessionStore")
}

func typedStore[S any](p StoreProvider, name, kind, adder string) (S, error) {
	var zero S
	s, err := p.StateStore(name)
	if err != nil {
		return zero, err
	}
	typed, ok := s.(S)
	if !ok {
		return zero, fmt.Errorf("processor: state store %q is a %T, not a %s %v (key and value types must be those given to %s)", name, s, kind, reflect.TypeFor[S](), adder)
	}
	return typed, nil
}
