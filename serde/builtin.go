package serde

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// String returns the UTF-8 serde, byte-identical to Kafka's StringSerializer.
// It rejects nil data (a tombstone) with an error wrapping ErrTombstone; an empty string
// is zero bytes, not nil.
func String() Serde[string] { return stringSerde{} }

type stringSerde struct{}

func (stringSerde) Name() string         { return "String" }
func (stringSerde) PreservesOrder() bool { return true }

func (stringSerde) Serialize(_ string, v string) ([]byte, error) {
	if v == "" {
		return []byte{}, nil
	}
	return []byte(v), nil
}

func (stringSerde) Deserialize(topic string, data []byte) (string, error) {
	if data == nil {
		return "", deErr("String", topic, ErrTombstone)
	}
	return string(data), nil
}

// Bytes returns the identity serde. nil maps to nil (a tombstone) both ways.
func Bytes() Serde[[]byte] { return bytesSerde{} }

type bytesSerde struct{}

func (bytesSerde) Name() string                                      { return "Bytes" }
func (bytesSerde) PreservesOrder() bool                              { return true }
func (bytesSerde) Serialize(_ string, v []byte) ([]byte, error)      { return v, nil }
func (bytesSerde) Deserialize(_ string, data []byte) ([]byte, error) { return data, nil }

// Int64 returns the 8-byte big-endian serde of Kafka's LongSerializer. Byte order equals
// value order only among values of one sign, so OrderPreserving reports false.
func Int64() Serde[int64] { return int64Serde{} }

type int64Serde struct{}

func (int64Serde) Name() string { return "Int64" }

func (int64Serde) Serialize(_ string, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)), nil
}

func (int64Serde) Deserialize(topic string, data []byte) (int64, error) {
	if data == nil {
		return 0, deErr("Int64", topic, ErrTombstone)
	}
	if len(data) != 8 {
		return 0, deErr("Int64", topic, fmt.Errorf("want 8 bytes, got %d", len(data)))
	}
	return int64(binary.BigEndian.Uint64(data)), nil
}

// Int32 returns the 4-byte big-endian serde of Kafka's IntegerSerializer. Byte order
// equals value order only among values of one sign, so OrderPreserving reports false.
func Int32() Serde[int32] { return int32Serde{} }

type int32Serde struct{}

func (int32Serde) Name() string { return "Int32" }

func (int32Serde) Serialize(_ string, v int32) ([]byte, error) {
	return binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(v)), nil
}

func (int32Serde) Deserialize(topic string, data []byte) (int32, error) {
	if data == nil {
		return 0, deErr("Int32", topic, ErrTombstone)
	}
	if len(data) != 4 {
		return 0, deErr("Int32", topic, fmt.Errorf("want 4 bytes, got %d", len(data)))
	}
	return int32(binary.BigEndian.Uint32(data)), nil
}

// Float64 returns the 8-byte IEEE 754 big-endian serde of Kafka's DoubleSerializer. Like
// Java's Double.doubleToLongBits, it writes every NaN as the one canonical NaN
// (7ff8000000000000), so equal values give equal bytes (and equal keys) in both.
func Float64() Serde[float64] { return float64Serde{} }

// canonicalNaN is the bit pattern of Java's Double.NaN; Go's math.NaN differs in its
// lowest bit.
const canonicalNaN = 0x7ff8000000000000

type float64Serde struct{}

func (float64Serde) Name() string { return "Float64" }

func (float64Serde) Serialize(_ string, v float64) ([]byte, error) {
	bits := math.Float64bits(v)
	if math.IsNaN(v) {
		bits = canonicalNaN
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), bits), nil
}

func (float64Serde) Deserialize(topic string, data []byte) (float64, error) {
	if data == nil {
		return 0, deErr("Float64", topic, ErrTombstone)
	}
	if len(data) != 8 {
		return 0, deErr("Float64", topic, fmt.Errorf("want 8 bytes, got %d", len(data)))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(data)), nil
}

// JSON returns a serde that encodes T with encoding/json. nil data is a tombstone and
// fails to deserialize (wrapping ErrTombstone) unless T is a pointer, map, slice or
// interface type, in which case it becomes T's nil; a nil T serializes to nil bytes.
func JSON[T any]() Serde[T] {
	t := reflect.TypeFor[T]()
	return jsonSerde[T]{name: "JSON[" + t.String() + "]", nilable: nilable(t)}
}

func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return true
	}
	return false
}

type jsonSerde[T any] struct {
	name    string
	nilable bool
}

func (s jsonSerde[T]) Name() string { return s.name }

func (s jsonSerde[T]) Serialize(topic string, v T) ([]byte, error) {
	if s.nilable && reflect.ValueOf(&v).Elem().IsNil() {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, serErr(s.name, topic, err)
	}
	return b, nil
}

func (s jsonSerde[T]) Deserialize(topic string, data []byte) (T, error) {
	var v T
	if data == nil {
		if s.nilable {
			return v, nil
		}
		return v, deErr(s.name, topic, ErrTombstone)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		var zero T
		return zero, deErr(s.name, topic, err)
	}
	return v, nil
}

// Nullable wraps a serde so that nil bytes (a tombstone) and a nil *T map to each other.
func Nullable[T any](s Serde[T]) Serde[*T] { return nullableSerde[T]{inner: s} }

type nullableSerde[T any] struct{ inner Serde[T] }

func (n nullableSerde[T]) Name() string         { return "Nullable[" + Name(n.inner) + "]" }
func (n nullableSerde[T]) PreservesOrder() bool { return OrderPreserving(n.inner) }

func (n nullableSerde[T]) Serialize(topic string, v *T) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return n.inner.Serialize(topic, *v)
}

func (n nullableSerde[T]) Deserialize(topic string, data []byte) (*T, error) {
	if data == nil {
		return nil, nil
	}
	v, err := n.inner.Deserialize(topic, data)
	if err != nil {
		return nil, err
	}
	return &v, nil
}
