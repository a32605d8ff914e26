// Package serde turns typed keys and values into the bytes Kafka stores, and back.
//
// A Serde[T] serializes and deserializes values of type T for a given topic, like Kafka's
// Serializer and Deserializer. The built-in serdes are byte-compatible with their Kafka
// (Java) counterparts, so a Java consumer or kcat reads what eddy writes:
//
//	String   UTF-8 bytes                      StringSerializer
//	Bytes    the bytes as they are            ByteArraySerializer
//	Int64    8 bytes, big-endian              LongSerializer
//	Int32    4 bytes, big-endian              IntegerSerializer
//	Float64  8 bytes, IEEE 754, big-endian    DoubleSerializer
//	JSON[T]  encoding/json                    (any JSON serializer)
//
// # Tombstones
//
// A record whose value is null (nil bytes) is a tombstone: it deletes the key from a
// compacted topic or a store. Serdes handle nil explicitly and never pass it off as a zero
// value: a serde whose type has no nil (String, Int64, JSON of a struct, ...) fails to
// deserialize nil with an error that wraps ErrTombstone. Types that have a nil map it to
// nil bytes and back (Bytes, Nullable). Wrap a serde with Nullable to accept tombstones
// as nil pointers.
//
// # Byte order
//
// Stores keep keys as serialized bytes, so a range over a store is a range of byte
// strings. OrderPreserving reports whether a serde's byte order equals the order of its
// values; String and Bytes preserve it, the signed big-endian integers only for values
// of one sign.
package serde

import (
	"errors"
	"fmt"
)

// Serializer turns a value into bytes for a topic.
type Serializer[T any] interface {
	Serialize(topic string, value T) ([]byte, error)
}

// Deserializer turns bytes read from a topic into a value.
type Deserializer[T any] interface {
	Deserialize(topic string, data []byte) (T, error)
}

// Serde is a Serializer and a Deserializer of one type.
type Serde[T any] interface {
	Serializer[T]
	Deserializer[T]
}

// ErrTombstone is wrapped by the error a serde returns when asked to deserialize a null
// value (nil bytes) into a type that has no nil. Wrap the serde with Nullable to accept
// tombstones.
var ErrTombstone = errors.New("null value (tombstone)")

// ErrPanicked is wrapped by the error eddy reports when a deserializer panicked on the
// bytes of a record it read from a topic: the record follows the bad-record policy like
// one the deserializer rejected with an error. A deserializer should return an error
// for bytes it cannot read rather than panic.
var ErrPanicked = errors.New("deserializer panicked")

// Error tells which serde failed, doing what, on which topic.
type Error struct {
	Serde string // "String", "Int64", "JSON[main.Event]", ...
	Op    string // "serialize" or "deserialize"
	Topic string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("serde %s: %s on topic %q: %v", e.Serde, e.Op, e.Topic, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func serErr(name, topic string, err error) error {
	return &Error{Serde: name, Op: "serialize", Topic: topic, Err: err}
}

func deErr(name, topic string, err error) error {
	return &Error{Serde: name, Op: "deserialize", Topic: topic, Err: err}
}

// OrderPreserving reports whether s serializes values so that the byte order of the
// serialized forms equals the order of the values. A serde that does not say
// (implements no PreservesOrder method) is taken not to preserve order.
func OrderPreserving[T any](s Serde[T]) bool {
	o, ok := s.(interface{ PreservesOrder() bool })
	return ok && o.PreservesOrder()
}

// Name gives a short human-readable name of a serde for messages and descriptions.
func Name[T any](s Serde[T]) string {
	if n, ok := s.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
}

// Funcs builds a Serde from two functions; name appears in errors.
func Funcs[T any](name string, ser func(topic string, v T) ([]byte, error), de func(topic string, data []byte) (T, error)) Serde[T] {
	return funcSerde[T]{name: name, ser: ser, de: de}
}

type funcSerde[T any] struct {
	name string
	ser  func(string, T) ([]byte, error)
	de   func(string, []byte) (T, error)
}

func (f funcSerde[T]) Name() string { return f.name }

func (f funcSerde[T]) Serialize(topic string, v T) ([]byte, error) {
	b, err := f.ser(topic, v)
	if err != nil {
		return nil, serErr(f.name, topic, err)
	}
	return b, nil
}

func (f funcSerde[T]) Deserialize(topic string, data []byte) (T, error) {
	v, err := f.de(topic, data)
	if err != nil {
		var zero T
		return zero, deErr(f.name, topic, err)
	}
	return v, nil
}
