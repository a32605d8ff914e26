// Package graph is the checked, type-erased form of a topology: nodes, stores and
// sub-topologies, plus the factories that make a task's running node instances. The
// public topology package builds it; the task engine runs it.
package graph

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/processor"
)

// Kind is a node's role.
type Kind int

const (
	Source Kind = iota
	Processor
	Sink
)

func (k Kind) String() string {
	switch k {
	case Source:
		return "Source"
	case Sink:
		return "Sink"
	}
	return "Processor"
}

// Node is one node of the topology.
type Node struct {
	Name     string
	Kind     Kind
	Index    int // insertion order
	Parents  []string
	Children []string // filled by the builder, in insertion order

	// Types the node takes (processor, sink) and forwards (source, processor).
	InKey, InValue, OutKey, OutValue reflect.Type

	// Topics a source reads, or the one topic a sink writes. Internal topics (of a
	// repartition) are given by their short name; Topic() resolves them.
	Topics   []string
	Internal bool // the topic is a repartition topic of this application

	Stores []string // stores attached to a processor

	KeySerde, ValueSerde string // names, for descriptions

	// OffsetReset is where a source starts reading a partition of its topics that has no
	// committed offset.
	OffsetReset OffsetReset

	// Partitions of a repartition topic (sinks of an internal topic); 0: as many as the
	// largest source topic of the sub-topology that writes it.
	RepartitionPartitions int32

	// Factory makes the node's running instance for a task.
	Factory Factory

	// Sink is set on a processor that writes into a store outside Kafka (package sink):
	// the runtime resolves its pending transactions at task start.
	Sink *sinktxn.Node
}

// TopicNames resolves the node's topics for an application.
func (n *Node) TopicNames(appID string) []string {
	if !n.Internal {
		return n.Topics
	}
	out := make([]string, len(n.Topics))
	for i, t := range n.Topics {
		out[i] = names.RepartitionTopic(appID, t)
	}
	return out
}

// Kinds of store (Store.Kind).
const (
	KindKeyValue = ""
	KindWindow   = "window"
	KindSession  = "session"
)

// Store is a state store of the topology.
type Store struct {
	Name       string
	Index      int
	Processors []string
	Logged     bool
	InMemory   bool
	KeyType    reflect.Type
	ValueType  reflect.Type
	KeySerde   string
	ValueSerde string
	// NewTyped makes the typed store (a statestore.KeyValueStore[K, V]) over its buffer.
	NewTyped func(buf *kvstore.Buffer, topic string, m kvstore.Metrics) any
	// Segments, when set, keeps the store in time segments (a window or session store):
	// its backend is a kvstore.Segmented over the task's.
	Segments *kvstore.SegmentSpec
	// Kind is what queries see of the store: KindKeyValue, KindWindow or KindSession.
	// Windows reads committed windows or sessions of a window or session store, and
	// KeyToJSON deserializes a stored key (of any kind of store), for interactive
	// queries and key scans.
	Kind      string
	Windows   func(be kvstore.Backend, topic string, q windowstore.Range) ([]windowstore.Raw, error)
	KeyToJSON func(key []byte, topic string) (any, error)
	// Keys and Values are the store's serde.Serde[K] and serde.Serde[V], for typed
	// interactive queries.
	Keys, Values any
	// KeyFromText parses a key given as text (a URL path segment) and serializes it;
	// ValueToJSON deserializes a value into something encoding/json can write. They
	// serve interactive queries over HTTP.
	KeyFromText func(text, topic string) ([]byte, error)
	ValueToJSON func(value []byte, topic string) (any, error)
	// SourceTopic, when set, is the user topic the store is the table of (a table read
	// from a topic): the topic is the store's changelog (Kafka Streams'
	// reuse.ktable.source.topics). The store writes no changelog; it is restored from
	// the topic with FromSource, up to the committed offset of the task's input, and
	// its checkpoint is the offset of the topic it reflects.
	SourceTopic string
	FromSource  func(rec RawRecord) (key, value []byte, skip bool, err error)
	// Global: a global store (see GlobalStore), kept in full by every instance and read
	// by every task; not part of any sub-topology.
	Global bool
	// CacheMaxBytes > 0: the store has a record cache (topology's StoreNode.WithCaching),
	// through which its processors forward (processor.ForwardThroughCache); the value is
	// the budget of each task's caches.
	CacheMaxBytes int64
}

// GlobalStore is a store every instance keeps in full from all partitions of a topic
// (Kafka Streams' global store, the store of a GlobalKTable). The topic is its
// changelog: there is no other. It is updated from the topic alone; processors only
// read it.
type GlobalStore struct {
	Store *Store
	Topic string
	// Entry turns a record of Topic into the store's key and value bytes; a nil value
	// deletes the key, skip drops the record (a null key). An error names what is wrong
	// with the record (it does not deserialize).
	Entry func(rec RawRecord) (key, value []byte, skip bool, err error)
}

// Subtopology is a connected part of the graph; parts joined only through a topic are
// separate sub-topologies.
type Subtopology struct {
	ID     int
	Nodes  []*Node // insertion order
	Stores []*Store
	// SourceTopics are the user topics the sub-topology reads; RepartitionSources the
	// short names of the repartition topics it reads.
	SourceTopics       []string
	RepartitionSources []string
	// RepartitionSinks are the short names of the repartition topics it writes.
	RepartitionSinks []string
}

// AllSourceTopics returns every topic the sub-topology reads, repartition topics resolved
// for appID.
func (s *Subtopology) AllSourceTopics(appID string) []string {
	out := append([]string(nil), s.SourceTopics...)
	for _, r := range s.RepartitionSources {
		out = append(out, names.RepartitionTopic(appID, r))
	}
	return out
}

// Graph is a whole checked topology.
type Graph struct {
	Nodes         map[string]*Node
	Order         []*Node // insertion order
	Stores        map[string]*Store
	StoreOrder    []*Store
	Subtopologies []*Subtopology
	// GlobalStores are the global stores, in the order they were added; Stores holds
	// them too.
	GlobalStores []*GlobalStore
	// CopartitionGroups are groups of user topics whose records are joined by key, so
	// each group's topics must have equal partition counts.
	CopartitionGroups [][]string
}

// Runtime is what a node instance uses of its task.
type Runtime interface {
	TaskID() processor.TaskID
	ApplicationID() string
	StreamTime() time.Time
	RecordMetadata() (processor.RecordMetadata, bool)
	RequestCommit()
	// Schedule registers a punctuator of node.
	Schedule(node string, interval time.Duration, typ processor.PunctuationType, fn processor.Punctuator) (processor.Cancellable, error)
	// Store returns the typed store instance (statestore.KeyValueStore[K, V]).
	Store(name string) (any, error)
	// GlobalStore reports whether name is a global store, which every processor reads
	// without attaching it.
	GlobalStore(name string) bool
	// StoreSpec returns the topology's store name, or nil.
	StoreSpec(name string) *Store
	// Send hands a serialized sink record to the task's producer. partition < 0 means
	// the default partitioner (murmur2 of the key, as Kafka's).
	Send(topic string, partition int32, key, value []byte, headers []processor.Header, ts time.Time) error
	// Partitions returns the partition count of an output topic.
	Partitions(topic string) (int32, error)
	// Logger returns the logger of a node.
	Logger(node string) *slog.Logger
	// Context is cancelled when the task closes.
	Context() context.Context
}
