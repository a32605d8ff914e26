// Package topology describes what an eddy application computes: source nodes read
// topics, processor nodes transform records, sink nodes write topics, and state stores
// hold what processors remember.
//
//	b := topology.NewBuilder()
//	topology.AddSource(b, "lines", serde.String(), serde.String(), "streams-plaintext-input")
//	topology.AddProcessor(b, "split", splitWords, "lines")
//	topology.AddRepartition(b, "words", serde.String(), serde.String(), "split")
//	topology.AddProcessor(b, "count", countWords, "words")
//	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
//	topology.AddSink(b, "output", "streams-wordcount-output", serde.String(), serde.Int64(), "count")
//	topo, err := b.Build()
//
// Nodes are typed: a node takes the key and value types its parents forward, and Build
// checks every edge, so a mismatch is an error naming the node before anything runs.
// Build also splits the graph into sub-topologies (parts joined only through a topic);
// the runtime runs one task per sub-topology and partition.
package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// ErrInvalid is wrapped by every error Build returns.
var ErrInvalid = errors.New("invalid topology")

// Builder collects nodes and stores; Build checks them and makes a Topology. The Add
// functions never fail: problems are reported by Build, each naming its node.
type Builder struct {
	nodes  []*graph.Node
	byName map[string]*graph.Node
	stores []*graph.Store
	errs   []error
	built  bool
	// copartition: groups of topics that must have equal partition counts.
	copartition [][]string
	// globals are the global stores (AddGlobalStore).
	globals []*graph.GlobalStore
	// cacheMaxBytes is the budget of a task's record caches, when cacheMaxSet
	// (SetCacheMaxBytes).
	cacheMaxBytes int64
	cacheMaxSet   bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{byName: map[string]*graph.Node{}}
}

func (b *Builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
}

func (b *Builder) add(n *graph.Node) {
	if n.Name == "" {
		b.fail("a %s node has an empty name", n.Kind)
		return
	}
	if _, dup := b.byName[n.Name]; dup {
		b.fail("duplicate node name %q", n.Name)
		return
	}
	n.Index = len(b.nodes)
	b.nodes = append(b.nodes, n)
	b.byName[n.Name] = n
}

// checkTopicPart reports a name that becomes part of an internal topic name (a store's
// changelog, a repartition topic) but would make an illegal Kafka topic name.
func (b *Builder) checkTopicPart(what, name string) {
	if name == "" {
		return // reported as an empty name
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.fail("%s name %q: it is part of a topic name, so it may hold only ASCII letters, digits, '.', '_' and '-'", what, name)
			return
		}
	}
}

// TimestampExtractor gives each record a source reads its timestamp (Kafka Streams'
// TimestampExtractor), for example from a field of the value. rec is the deserialized
// record with the timestamp Kafka has for it; partitionTime is the largest timestamp
// extracted so far from the records of the same topic partition (by this task), zero
// before the first. A negative result (before the Unix epoch, or the zero time) drops
// the record with a warning and the skipped-records metric, as Kafka Streams drops it;
// an error is handled as a record that cannot be deserialized (Config.OnBadRecord).
// Without an extractor a source uses the record's timestamp and stops the application
// on a negative one (Kafka Streams' default, FailOnInvalidTimestamp).
//
// The extracted timestamp is the record's timestamp downstream: stream time,
// punctuation, aggregation results and the records written to topics carry it.
type TimestampExtractor[K, V any] func(rec processor.Record[K, V], partitionTime time.Time) (time.Time, error)

// OffsetReset is where a source starts reading a partition that has no committed
// offset (Kafka Streams' AutoOffsetReset).
type OffsetReset = graph.OffsetReset

// The offset reset policies.
const (
	// ResetDefault is the application's policy: earliest (as Kafka Streams').
	ResetDefault = graph.ResetDefault
	// Earliest reads a partition from its first record.
	Earliest = graph.ResetEarliest
	// Latest reads only the records written after the application first reads the
	// partition. While nothing of the partition is committed, every start (and every
	// rebalance that moves it) begins at the end again, as with Kafka's
	// auto.offset.reset=latest.
	Latest = graph.ResetLatest
)

// SourceNode configures a source after AddSource.
type SourceNode[K, V any] struct {
	node *graph.Node
	keys serde.Serde[K]
	vals serde.Serde[V]
}

// WithTimestampExtractor gives the source's records the timestamps fn extracts instead
// of the ones Kafka has for them.
func (s *SourceNode[K, V]) WithTimestampExtractor(fn TimestampExtractor[K, V]) *SourceNode[K, V] {
	s.node.Factory = graph.SourceFactory(s.keys, s.vals, graph.TimestampExtractor[K, V](fn))
	return s
}

// WithOffsetReset sets where the source starts reading a partition of its topics with
// no committed offset (Kafka Streams' Consumed.withOffsetResetPolicy). The test driver
// (topologytest) processes every record it is given either way.
func (s *SourceNode[K, V]) WithOffsetReset(r OffsetReset) *SourceNode[K, V] {
	s.node.OffsetReset = r
	return s
}

// AddSource adds a source node that reads the given topics and forwards (K, V) records.
func AddSource[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], topics ...string) *SourceNode[K, V] {
	if len(topics) == 0 {
		b.fail("source %q reads no topic", name)
	}
	if slices.Contains(topics, "") {
		b.fail("source %q reads an empty topic name", name)
	}
	if keys == nil || values == nil {
		b.fail("source %q has a nil %s serde: give it one (package serde)", name, nilSerde(keys == nil, values == nil))
	}
	n := &graph.Node{
		Name: name, Kind: graph.Source, Topics: topics,
		OutKey: reflect.TypeFor[K](), OutValue: reflect.TypeFor[V](),
		KeySerde: serde.Name(keys), ValueSerde: serde.Name(values),
		Factory: graph.SourceFactory[K, V](keys, values, nil),
	}
	b.add(n)
	return &SourceNode[K, V]{node: n, keys: keys, vals: values}
}

// AddProcessor adds a processor node fed by the named parents. supplier is called once
// per task.
func AddProcessor[KIn, VIn, KOut, VOut any](b *Builder, name string, supplier processor.Supplier[KIn, VIn, KOut, VOut], parents ...string) {
	if supplier == nil {
		b.fail("processor %q has a nil supplier", name)
	}
	b.add(&graph.Node{
		Name: name, Kind: graph.Processor, Parents: parents,
		InKey: reflect.TypeFor[KIn](), InValue: reflect.TypeFor[VIn](),
		OutKey: reflect.TypeFor[KOut](), OutValue: reflect.TypeFor[VOut](),
		Factory: graph.ProcessorFactory(supplier),
	})
}

// Partitioner chooses the partition (in [0, n)) of a record a sink writes.
type Partitioner[K, V any] func(topic string, key K, value V, n int32) int32

// SinkNode configures a sink after AddSink.
type SinkNode[K, V any] struct {
	b    *Builder
	node *graph.Node
	keys serde.Serde[K]
	vals serde.Serde[V]
}

// WithPartitioner makes the sink choose partitions with p instead of Kafka's default
// (murmur2 of the serialized key).
func (s *SinkNode[K, V]) WithPartitioner(p Partitioner[K, V]) *SinkNode[K, V] {
	s.node.Factory = graph.SinkFactory(s.keys, s.vals, graph.Partitioner[K, V](p))
	return s
}

// AddSink adds a sink node that writes the (K, V) records of its parents to topic.
func AddSink[K, V any](b *Builder, name, topic string, keys serde.Serde[K], values serde.Serde[V], parents ...string) *SinkNode[K, V] {
	if topic == "" {
		b.fail("sink %q writes to an empty topic name", name)
	}
	if keys == nil || values == nil {
		b.fail("sink %q has a nil %s serde: give it one (package serde)", name, nilSerde(keys == nil, values == nil))
	}
	n := &graph.Node{
		Name: name, Kind: graph.Sink, Topics: []string{topic}, Parents: parents,
		InKey: reflect.TypeFor[K](), InValue: reflect.TypeFor[V](),
		KeySerde: serde.Name(keys), ValueSerde: serde.Name(values),
		Factory: graph.SinkFactory[K, V](keys, values, nil),
	}
	b.add(n)
	return &SinkNode[K, V]{b: b, node: n, keys: keys, vals: values}
}

// RepartitionNode configures a repartition after AddRepartition.
type RepartitionNode[K, V any] struct {
	sink   *graph.Node
	source *graph.Node
	keys   serde.Serde[K]
	vals   serde.Serde[V]
}

// WithPartitions sets the partition count of the repartition topic (0 means the
// default). By default it is sized as Kafka Streams sizes it: as many partitions as the
// other source topics of the sub-topology that reads it, which must be co-partitioned
// with it; when that sub-topology reads only repartition topics, as many as the tasks of
// the sub-topology that writes it (its source topics' partition count).
func (r *RepartitionNode[K, V]) WithPartitions(n int32) *RepartitionNode[K, V] {
	r.sink.RepartitionPartitions = n
	return r
}

// WithPartitioner chooses the partition of each record; by default murmur2 of the key,
// so records with equal keys meet in one task.
func (r *RepartitionNode[K, V]) WithPartitioner(p Partitioner[K, V]) *RepartitionNode[K, V] {
	r.sink.Factory = graph.SinkFactory(r.keys, r.vals, graph.Partitioner[K, V](p))
	return r
}

// AddRepartition re-keys a stream through the topic <applicationID>-<name>-repartition:
// it adds a sink named "<name>-sink" fed by parents and a source named name that reads
// the topic back, so children of name see records partitioned by their (new) key. The
// runtime creates the topic. The two sides belong to different sub-topologies.
func AddRepartition[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], parents ...string) *RepartitionNode[K, V] {
	b.checkTopicPart("repartition", name)
	sink := &graph.Node{
		Name: name + "-sink", Kind: graph.Sink, Topics: []string{name}, Internal: true, Parents: parents,
		InKey: reflect.TypeFor[K](), InValue: reflect.TypeFor[V](),
		KeySerde: serde.Name(keys), ValueSerde: serde.Name(values),
		Factory: graph.SinkFactory[K, V](keys, values, nil),
	}
	source := &graph.Node{
		Name: name, Kind: graph.Source, Topics: []string{name}, Internal: true,
		OutKey: reflect.TypeFor[K](), OutValue: reflect.TypeFor[V](),
		KeySerde: serde.Name(keys), ValueSerde: serde.Name(values),
		Factory: graph.SourceFactory[K, V](keys, values, nil),
	}
	b.add(sink)
	b.add(source)
	return &RepartitionNode[K, V]{sink: sink, source: source, keys: keys, vals: values}
}

// StoreNode configures a store after AddKeyValueStore.
type StoreNode struct {
	store *graph.Store
	dups  *bool // a window store's RetainDuplicates
}

// InMemory keeps the store in memory instead of the task's bbolt file. It is restored
// from its changelog in full on every start; use it for small state.
func (s *StoreNode) InMemory() *StoreNode {
	s.store.InMemory = true
	return s
}

// WithoutChangelog disables the changelog: the store is local only and is lost with its
// file (or, in memory, with the process). Its content is then not covered by
// exactly-once: a crash also loses up to eddy.Config.StoreWriteInterval (default 1 s)
// of its committed changes, whose input is not processed again.
func (s *StoreNode) WithoutChangelog() *StoreNode {
	s.store.Logged = false
	return s
}

// WithCaching gives the store a record cache, as Kafka Streams' withCachingEnabled on
// a store builder: its processors' records forwarded with processor.ForwardThroughCache
// are held back and forwarded at the task's next commit, each key's latest once (see
// there). The budget is per task, shared with the task's other caches (the DSL's
// tables'): SetCacheMaxBytes, default 10 MiB. Reads and the changelog do not change:
// eddy's stores hold their writes until the commit anyway (one changelog record per
// key per commit, reads see the latest write), which is what Kafka Streams' caching
// store adds to its stores. Key-value stores only.
func (s *StoreNode) WithCaching() *StoreNode {
	s.store.CacheMaxBytes = -1 // the builder's budget, set at Build
	return s
}

// SetCacheMaxBytes sets the byte budget of each task's record caches (Kafka Streams'
// statestore.cache.max.bytes, whose budget is per instance): default 10 MiB. An instance
// holds at most its task count times n. n <= 0 turns caching off for the stores with
// WithCaching.
func (b *Builder) SetCacheMaxBytes(n int64) {
	b.cacheMaxBytes, b.cacheMaxSet = n, true
}

// AddKeyValueStore adds a key-value store of (K, V) attached to the named processors,
// which then reach it with processor.KeyValueStore[K, V](ctx, name). Its changelog topic
// is <applicationID>-<name>-changelog.
func AddKeyValueStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], processors ...string) *StoreNode {
	for _, s := range b.stores {
		if s.Name == name {
			b.fail("duplicate store name %q", name)
			return &StoreNode{store: &graph.Store{}}
		}
	}
	if name == "" {
		b.fail("a store has an empty name")
	}
	b.checkTopicPart("store", name)
	if strings.HasPrefix(name, names.OffsetsStorePrefix) {
		b.fail("store name %q: names starting with %q are eddy's own", name, names.OffsetsStorePrefix)
	}
	st := &graph.Store{
		Name: name, Index: len(b.stores), Processors: processors, Logged: true,
		KeyType: reflect.TypeFor[K](), ValueType: reflect.TypeFor[V](),
		KeySerde: serde.Name(keys), ValueSerde: serde.Name(values),
		NewTyped: func(buf *kvstore.Buffer, topic string, m kvstore.Metrics) any {
			return kvstore.NewKeyValueStore(buf, topic, keys, values, m)
		},
		Keys: keys, Values: values,
		KeyFromText: func(text, topic string) ([]byte, error) {
			k, err := parseText[K](text)
			if err != nil {
				return nil, err
			}
			b, err := keys.Serialize(topic, k)
			if err == nil && b == nil {
				err = fmt.Errorf("key %q: %w", text, statestore.ErrNullKey)
			}
			return b, err
		},
		KeyToJSON: func(key []byte, topic string) (any, error) {
			return serdes.Deserialize(keys, topic, key)
		},
		ValueToJSON: func(value []byte, topic string) (any, error) {
			return serdes.Deserialize(values, topic, value)
		},
	}
	b.stores = append(b.stores, st)
	return &StoreNode{store: st}
}

// parseText reads a key written as text: as it is for strings and byte slices, a
// number for integer and float types, JSON for anything else.
func parseText[K any](text string) (K, error) {
	var k K
	v := reflect.ValueOf(&k).Elem()
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
		return k, nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(text))
			return k, nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, v.Type().Bits())
		if err != nil {
			return k, fmt.Errorf("key %q is not a %s: %w", text, v.Type(), err)
		}
		v.SetInt(n)
		return k, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 10, v.Type().Bits())
		if err != nil {
			return k, fmt.Errorf("key %q is not a %s: %w", text, v.Type(), err)
		}
		v.SetUint(n)
		return k, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, v.Type().Bits())
		if err != nil {
			return k, fmt.Errorf("key %q is not a %s: %w", text, v.Type(), err)
		}
		v.SetFloat(f)
		return k, nil
	}
	if err := json.Unmarshal([]byte(text), &k); err != nil {
		return k, fmt.Errorf("key %q is not the JSON of a %s: %w", text, v.Type(), err)
	}
	return k, nil
}

// ChangelogFromSource makes topic, which the store's source node reads, the store's
// changelog (Kafka Streams' reuse.ktable.source.topics): the store writes no changelog
// topic of its own, and is restored from topic, each record made into the store's entry
// by entry (a nil value deletes the key; skip drops the record), up to the task's
// committed input offset. Its checkpoint is the offset of topic it reflects. Use it
// only for a store that holds exactly what the topic says per key, as a table read
// from the topic does; stream.TableFrom does it.
func ChangelogFromSource(s *StoreNode, topic string, entry func(key, value []byte, ts time.Time) (k, v []byte, skip bool, err error)) {
	s.store.Logged = false
	s.store.SourceTopic = topic
	s.store.FromSource = func(rec graph.RawRecord) ([]byte, []byte, bool, error) {
		return entry(rec.Key, rec.Value, rec.Timestamp)
	}
}

// QueryValuesAs makes interactive queries of the store (eddy.Query, the HTTP handler)
// read its values with values instead of the store's serde: a layer above the
// processor API (the stream DSL) keeps values with a timestamp and shows queries the
// values alone. values is only asked to deserialize.
func QueryValuesAs[V any](s *StoreNode, values serde.Serde[V]) {
	s.store.Values = values
	s.store.ValueType = reflect.TypeFor[V]()
	s.store.ValueToJSON = func(value []byte, topic string) (any, error) {
		return values.Deserialize(topic, value)
	}
}

// ConnectStore attaches the store name, added with AddKeyValueStore, to more processors,
// as Kafka Streams' connectProcessorAndStateStores: a layer above (the stream DSL) that
// learns of a store's readers after adding it.
func (b *Builder) ConnectStore(name string, processors ...string) {
	for _, s := range b.stores {
		if s.Name == name {
			s.Processors = append(s.Processors, processors...)
			return
		}
	}
	b.fail("store %q (to attach to %s) was never added with AddKeyValueStore", name, strings.Join(processors, ", "))
}

// Copartition declares that the records of topics are joined by key, so the topics must
// have equal partition counts (Kafka Streams' co-partitioning groups). Build records the
// group; CheckCopartitioning checks it against the partition counts the cluster has.
func (b *Builder) Copartition(topics ...string) {
	if len(topics) > 1 {
		b.copartition = append(b.copartition, slices.Clone(topics))
	}
}

// nilSerde names the missing serdes: "key", "value" or "key and value".
func nilSerde(key, value bool) string {
	switch {
	case key && value:
		return "key and value"
	case key:
		return "key"
	}
	return "value"
}
