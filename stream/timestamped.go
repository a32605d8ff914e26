package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
)

// Timestamped is a value of a DSL store with the timestamp of the record that last
// updated it, as in Kafka Streams' timestamped key-value stores: aggregations and
// table-table joins derive their output timestamps from it. A processor-API node given
// a DSL store reads it as a statestore.KeyValueStore[K, Timestamped[V]]; interactive
// queries (eddy.Query[K, V]) see the plain values.
type Timestamped[V any] struct {
	Value     V
	Timestamp time.Time
}

// timestampedSerde writes Kafka Streams' ValueAndTimestamp layout: 8 bytes of
// big-endian milliseconds since the epoch, then the value's bytes.
func timestampedSerde[V any](values serde.Serde[V]) serde.Serde[Timestamped[V]] {
	name := "Timestamped[" + serde.Name(values) + "]"
	return serde.Funcs(name,
		func(topic string, v Timestamped[V]) ([]byte, error) {
			vb, err := values.Serialize(topic, v.Value)
			if err != nil {
				return nil, err
			}
			if vb == nil {
				return nil, errors.New("the value serializes to null, which a store cannot keep: remove the key instead")
			}
			out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(vb)), uint64(v.Timestamp.UnixMilli()))
			return append(out, vb...), nil
		},
		func(topic string, data []byte) (Timestamped[V], error) {
			if len(data) < 8 {
				return Timestamped[V]{}, fmt.Errorf("want at least 8 bytes (a timestamp), got %d", len(data))
			}
			v, err := values.Deserialize(topic, data[8:])
			if err != nil {
				return Timestamped[V]{}, err
			}
			return Timestamped[V]{Value: v, Timestamp: time.UnixMilli(int64(binary.BigEndian.Uint64(data[:8]))).UTC()}, nil
		})
}

// valueOnlySerde reads the value of a timestamped store's bytes, for interactive
// queries. It never serializes: queries only read.
func valueOnlySerde[V any](values serde.Serde[V]) serde.Serde[V] {
	return serde.Funcs(serde.Name(values),
		func(string, V) ([]byte, error) {
			return nil, errors.New("a DSL store's query view only reads")
		},
		func(topic string, data []byte) (V, error) {
			if len(data) < 8 {
				var zero V
				return zero, fmt.Errorf("want at least 8 bytes (a timestamp), got %d", len(data))
			}
			return values.Deserialize(topic, data[8:])
		})
}

// tsWriter is what putOrDelete needs of a DSL store.
type tsWriter[K, V any] interface {
	Put(K, Timestamped[V]) error
	Delete(K) error
}

// putOrDelete keeps v, with timestamp ts, as key's value, or removes key when v is nil
// (null): a table's store never holds null.
func putOrDelete[K, V any](kv tsWriter[K, V], key K, v *V, ts time.Time) error {
	if v == nil {
		return kv.Delete(key)
	}
	return kv.Put(key, Timestamped[V]{Value: *v, Timestamp: ts})
}

// sourceEntry makes a record of a table's source topic into the entry of the table's
// store, as the table's source node writes it (for a restore from the topic): a null
// key is dropped, a tombstone deletes, a value is kept with the record's timestamp in
// the ValueAndTimestamp layout. A record that does not deserialize is reported.
func sourceEntry[K, V any](keys serde.Serde[K], values serde.Serde[V]) func(key, value []byte, ts time.Time) ([]byte, []byte, bool, error) {
	return func(key, value []byte, ts time.Time) ([]byte, []byte, bool, error) {
		if key == nil {
			return nil, nil, true, nil
		}
		if _, err := keys.Deserialize("", key); err != nil {
			return nil, nil, false, fmt.Errorf("key: %w", err)
		}
		if value == nil {
			return key, nil, false, nil
		}
		if _, err := values.Deserialize("", value); err != nil {
			return nil, nil, false, fmt.Errorf("value: %w", err)
		}
		out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), uint64(ts.UnixMilli()))
		return key, append(out, value...), false, nil
	}
}
