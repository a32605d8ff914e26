package stream

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// Builder builds a topology with the DSL. DSL operations and processor-API nodes mix:
// Topology returns the underlying topology.Builder, a Stream's Name is the graph node it
// ends at, and FromNode makes a Stream of a processor-API node.
type Builder struct {
	tb     *topology.Builder
	index  int
	stores []*pendingStore
	// connects are stores of the processor API attached to DSL nodes (Process).
	connects [][2]string
	errs     []error
	// copartitions are groups of source topics that must have equal partition counts.
	copartitions [][]string
	// caching: tables' stores behave as Kafka Streams' record-cached stores (the
	// default there and here); see NoCaching.
	caching bool
	// cacheMaxBytes is the budget of each task's record caches (CacheMaxBytes).
	cacheMaxBytes int64
}

// NewBuilder returns an empty Builder.
func NewBuilder(opts ...BuilderOption) *Builder {
	b := &Builder{tb: topology.NewBuilder(), caching: true, cacheMaxBytes: cache.DefaultMaxBytes}
	for _, o := range opts {
		o(b)
	}
	return b
}

// BuilderOption sets what holds for the whole topology.
type BuilderOption func(*Builder)

// NoCaching makes every table behave as Kafka Streams' tables do with record caching
// off (statestore.cache.max.bytes=0); WithoutCaching does it for one table.
//
// With caching on (Kafka Streams' default, and eddy's), a table's updates are held back
// in a record cache per task and forwarded at the task's next commit, once per key: the
// key's latest value, its old value as of the previous commit, and the timestamp and
// headers of its latest update, keys in the order of their latest updates (Kafka
// Streams' CachingKeyValueStore, NamedCache and ThreadCache). An update that deletes a
// key the table did not hold at the previous commit is dropped. When a task's caches
// outgrow their byte budget (CacheMaxBytes, default 10 MiB per task), the cache of the
// table just updated is flushed at once. So downstream operators, output topics and
// repartition topics see one update per key per commit; stores and their changelogs do
// anyway (a store's writes are buffered until the commit).
func NoCaching() BuilderOption { return func(b *Builder) { b.caching = false } }

// cached reports whether the store of an operation with options o is cached.
func (b *Builder) cached(o options) bool { return b.caching && !o.withoutCaching }

// Topology returns the processor-API builder under the DSL, to add processor-API nodes
// that read from or feed DSL nodes (by their names). Build the topology with the DSL
// Builder's Build, not the topology.Builder's.
func (b *Builder) Topology() *topology.Builder { return b.tb }

// Build adds the DSL's stores and checks the topology (see topology.Builder.Build).
func (b *Builder) Build() (*topology.Topology, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	for _, st := range b.stores {
		st.add(st.processors)
	}
	b.stores = nil
	for _, c := range b.connects {
		b.tb.ConnectStore(c[0], c[1])
	}
	b.connects = nil
	for _, g := range b.copartitions {
		b.tb.Copartition(g...)
	}
	return b.tb.Build()
}

func (b *Builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{topology.ErrInvalid}, args...)...))
}

// foreign reports, as a Build error, an operation's argument handle (a stream, table
// or global table) that is not of b: a zero handle (a variable never assigned from a
// Builder operation) or one of another Builder. A zero Table given to a join was a
// nil-pointer panic, a zero GlobalTable a join with a store named "" that Build
// accepted (issue 26).
func (b *Builder) foreign(op, what, node string, of *Builder) bool {
	switch of {
	case b:
		return false
	case nil:
		b.fail("%s: the %s is a zero %s: a variable never assigned from From, TableFrom, GlobalTableFrom or another operation of this Builder", op, what, what)
	default:
		b.fail("%s: the %s %q comes from another Builder: build the whole topology with one Builder", op, what, node)
	}
	return true
}

// unusable is the stream an operation that failed the Build returns: the nodes added
// after it name a parent that does not exist, which Build reports too, and nothing
// panics.
func unusable[K, V any](b *Builder, op string) Stream[K, V] {
	return Stream[K, V]{b: b, node: "<failed " + op + ">"}
}

// newName makes a node or store name in Kafka Streams' style: PREFIX-0000000007, the
// number counting every name the builder generated, so names are stable as long as the
// program builds its topology in the same order.
func (b *Builder) newName(prefix string) string {
	if b == nil {
		// Every operation names its node first: on a zero handle (a Stream, Table or
		// GlobalTable variable never assigned) there is no Builder to report to, so
		// this is Go's nil-map case and a panic that says so (as a nil map write does).
		panic("eddy/stream: an operation on a zero Stream or Table (a variable never assigned from From, TableFrom or another operation of a Builder): " + strings.TrimSuffix(prefix, "-"))
	}
	n := fmt.Sprintf("%s%010d", prefix, b.index)
	b.index++
	return n
}

// name returns the user's name from opts, or a generated one.
func (b *Builder) name(o options, prefix string) string {
	if b == nil {
		b.newName(prefix) // the zero handle's panic
	}
	if o.name != "" {
		b.index++ // as Kafka Streams: a given name still uses up an index
		return o.name
	}
	return b.newName(prefix)
}

// nodeName names the node of an operation that keeps no store: only Named applies;
// a store option is reported, as it would be silently meaningless.
func (b *Builder) nodeName(opts []Option, prefix string) string {
	o := collect(opts)
	name := b.name(o, prefix)
	if o.store != "" || o.inMemory || o.withoutChangelog || o.withoutCaching {
		b.fail("%s: Materialized, InMemory, WithoutChangelog and WithoutCaching apply to operations that make a table; this one keeps no store", name)
	}
	if o.retention != 0 {
		b.fail("%s: Retention applies to windowed aggregations; this operation keeps no window store", name)
	}
	return name
}

// pendingStore is a store added at Build, when every processor that reads it is known.
type pendingStore struct {
	name       string
	processors []string
	add        func(processors []string)
}

// addStore registers a timestamped store (values kept with the timestamp of their last
// update, as Kafka Streams' timestamped stores) for the processors given, and more
// added later by connect. Interactive queries (eddy.Query[K, V]) see plain values.
func addStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], o options, processors ...string) *pendingStore {
	ps := &pendingStore{name: name, processors: processors}
	ps.add = func(procs []string) {
		sn := topology.AddKeyValueStore(b.tb, name, keys, timestampedSerde(values), procs...)
		if o.inMemory {
			sn.InMemory()
		}
		switch {
		case o.withoutChangelog:
			sn.WithoutChangelog()
		case o.sourceTopic != "" && !o.ownChangelog:
			topology.ChangelogFromSource(sn, o.sourceTopic, sourceEntry(keys, values))
		}
		topology.QueryValuesAs(sn, valueOnlySerde(values))
	}
	b.stores = append(b.stores, ps)
	return ps
}

// connectStore attaches a store of the processor API to a DSL node at Build.
func (b *Builder) connectStore(store, node string) {
	b.connects = append(b.connects, [2]string{store, node})
}

func (p *pendingStore) connect(processors ...string) {
	p.processors = append(p.processors, processors...)
}

// Option names what an operation adds and how its store is kept.
type Option func(*options)

type options struct {
	name             string
	store            string
	inMemory         bool
	withoutChangelog bool
	withoutCaching   bool
	ownChangelog     bool
	retention        time.Duration // window stores (Retention)
	// sourceTopic: the store is the table of this topic (TableFrom), which is then its
	// changelog unless ownChangelog.
	sourceTopic string
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Named names the processor node (or, for a source, the source node; for a repartition,
// its topic) an operation adds, instead of a generated KSTREAM-…-000000000N name.
func Named(name string) Option { return func(o *options) { o.name = name } }

// Materialized names the store an operation keeps its table in, which makes it
// queryable with eddy.Query under that name; Kafka Streams' Materialized.as.
func Materialized(store string) Option { return func(o *options) { o.store = store } }

// InMemory keeps the operation's store in memory (see topology.StoreNode.InMemory).
func InMemory() Option { return func(o *options) { o.inMemory = true } }

// WithoutCaching makes the operation's table behave as with Kafka Streams' record
// caching off (Materialized.withCachingDisabled); see NoCaching.
func WithoutCaching() Option { return func(o *options) { o.withoutCaching = true } }

// WithOwnChangelog gives a table read from a topic (TableFrom) a changelog topic of its
// own, <application>-<store>-changelog, instead of restoring its store from the topic
// it reads (the default, Kafka Streams' topology.optimization=reuse.ktable.source.topics).
// Use it when the topic is not compacted and its retention may delete records the
// table still holds, or when records of the topic may fail to deserialize or be
// dropped by a timestamp extractor (a restore from the topic takes every record, with
// the timestamps Kafka has for them).
func WithOwnChangelog() Option { return func(o *options) { o.ownChangelog = true } }

// WithoutChangelog keeps the operation's store without a changelog topic (see
// topology.StoreNode.WithoutChangelog).
func WithoutChangelog() Option { return func(o *options) { o.withoutChangelog = true } }

// isNull reports whether v is Kafka's null: the nil of a pointer, slice, map, interface,
// channel or function type. Values of other types are never null.
func isNull[V any](v V) bool {
	switch any(v).(type) {
	case string, int, int32, int64, float64, bool:
		return false
	}
	rv := reflect.ValueOf(&v).Elem()
	switch rv.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
		return rv.IsNil()
	}
	return false
}

// proc is a processor made of a setup function, run at Init, that returns the function
// processing each record.
type proc[KI, VI, KO, VO any] struct {
	setup   func(ctx processor.Context[KO, VO]) (func(processor.Record[KI, VI]) error, error)
	process func(processor.Record[KI, VI]) error
}

func (p *proc[KI, VI, KO, VO]) Init(ctx processor.Context[KO, VO]) error {
	var err error
	p.process, err = p.setup(ctx)
	return err
}

func (p *proc[KI, VI, KO, VO]) Process(r processor.Record[KI, VI]) error { return p.process(r) }
func (p *proc[KI, VI, KO, VO]) Close() error                             { return nil }

func supplier[KI, VI, KO, VO any](setup func(ctx processor.Context[KO, VO]) (func(processor.Record[KI, VI]) error, error)) processor.Supplier[KI, VI, KO, VO] {
	return func() processor.Processor[KI, VI, KO, VO] { return &proc[KI, VI, KO, VO]{setup: setup} }
}

// stateless is a supplier of a processor that needs nothing but its context.
func stateless[KI, VI, KO, VO any](fn func(ctx processor.Context[KO, VO], r processor.Record[KI, VI]) error) processor.Supplier[KI, VI, KO, VO] {
	return supplier(func(ctx processor.Context[KO, VO]) (func(processor.Record[KI, VI]) error, error) {
		return func(r processor.Record[KI, VI]) error { return fn(ctx, r) }, nil
	})
}

// copartition records that the records of two groups of source topics meet in a join
// by key, so the topics must have equal partition counts.
func (b *Builder) copartition(a, c []string) {
	var topics []string
	for _, t := range append(append([]string(nil), a...), c...) {
		if !strings.HasPrefix(t, "repartition:") && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	if len(topics) > 1 {
		b.copartitions = append(b.copartitions, topics)
	}
}
