package stream

import (
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// Consumed is how a source reads its topics (Kafka Streams' Consumed): the serdes,
// the timestamp of each record and where a partition without a committed offset is
// read from. Make it with Consume; From and TableFrom take the serdes alone.
type Consumed[K, V any] struct {
	keys       serde.Serde[K]
	values     serde.Serde[V]
	timestamps topology.TimestampExtractor[K, V]
	reset      topology.OffsetReset
}

// Consume reads keys and values with the given serdes, the records' own timestamps and
// the application's offset reset (earliest); Consumed.with(keys, values).
func Consume[K, V any](keys serde.Serde[K], values serde.Serde[V]) Consumed[K, V] {
	return Consumed[K, V]{keys: keys, values: values}
}

// WithTimestamps gives each record the timestamp fn extracts from it (see
// topology.TimestampExtractor: a negative one drops the record); Kafka Streams'
// Consumed.withTimestampExtractor. For a table the value fn sees is nil for a
// tombstone (the table reads its topic with serde.Nullable).
func (c Consumed[K, V]) WithTimestamps(fn topology.TimestampExtractor[K, V]) Consumed[K, V] {
	c.timestamps = fn
	return c
}

// WithOffsetReset sets where the source reads a partition that has no committed
// offset: topology.Earliest (the default) or topology.Latest; Kafka Streams'
// Consumed.withOffsetResetPolicy.
func (c Consumed[K, V]) WithOffsetReset(r topology.OffsetReset) Consumed[K, V] {
	c.reset = r
	return c
}

// configure applies c to a source node that reads (K, V') records, where the source
// deserializes values with its own serde (a table's is Nullable).
func configureSource[K, V any](n *topology.SourceNode[K, V], timestamps topology.TimestampExtractor[K, V], reset topology.OffsetReset) {
	if timestamps != nil {
		n.WithTimestampExtractor(timestamps)
	}
	n.WithOffsetReset(reset)
}

// FromConsumed reads a stream from topics as c says (builder.stream(topics, consumed)).
func FromConsumed[K, V any](b *Builder, c Consumed[K, V], topics []string, opts ...Option) Stream[K, V] {
	name := b.nodeName(opts, "KSTREAM-SOURCE-")
	configureSource(topology.AddSource(b.tb, name, c.keys, c.values, topics...), c.timestamps, c.reset)
	return Stream[K, V]{b: b, node: name, sources: topics, keys: c.keys, values: c.values}
}

// nullableExtractor runs fn on a table source's records, which are read with
// serde.Nullable: a tombstone (nil) keeps the record's own timestamp.
func nullableExtractor[K, V any](fn topology.TimestampExtractor[K, V]) topology.TimestampExtractor[K, *V] {
	if fn == nil {
		return nil
	}
	return func(rec processor.Record[K, *V], partitionTime time.Time) (time.Time, error) {
		if rec.Value == nil {
			return rec.Timestamp, nil
		}
		return fn(processor.Record[K, V]{Key: rec.Key, Value: *rec.Value, Timestamp: rec.Timestamp, Headers: rec.Headers}, partitionTime)
	}
}
