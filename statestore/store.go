package statestore

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// MaxKeySize is the longest serialized key a store takes, in bytes: bbolt's limit,
// applied to every backend so that a task behaves the same on each.
const MaxKeySize = bolt.MaxKeySize

// KeyValueStore is a typed key-value store owned by one task. Keys are kept as
// serialized bytes, so Range and Prefix follow the byte order of the key serde (see
// serde.OrderPreserving). Iterators must be closed, and should be short-lived; the
// functions All, Range and Prefix give them as sequences for range loops, closed when
// the loop ends.
type KeyValueStore[K, V any] interface {
	// Name is the store's name in the topology.
	Name() string
	// Get returns the value of key; ok is false when the key is absent.
	Get(key K) (value V, ok bool, err error)
	// Put sets the value of key. A value that serializes to nil bytes deletes the key.
	Put(key K, value V) error
	// PutIfAbsent sets the value of key unless it is present, and returns the value the
	// key had and whether it had one.
	PutIfAbsent(key K, value V) (old V, existed bool, err error)
	// Delete removes key; deleting an absent key is no error.
	Delete(key K) error
	// Range iterates the keys whose serialized bytes lie in [from, to), in byte order.
	Range(from, to K) (Iterator[K, V], error)
	// Prefix iterates the keys whose serialized bytes start with those of prefix.
	Prefix(prefix K) (Iterator[K, V], error)
	// All iterates every key in byte order.
	All() (Iterator[K, V], error)
	// ApproximateCount returns the number of keys: the backend's count corrected by the
	// write buffer. The name is Kafka Streams' (approximateNumEntries, an estimate on
	// RocksDB). Here it counts the task's own view at the time of the call, but it is not
	// cheap: bbolt counts by walking every page of the store, and the correction costs a
	// lookup per buffered key. Use it for metrics and tests, not per record.
	ApproximateCount() (int64, error)
}

// Iterator walks key-value pairs in key order. Call Next before the first pair; Close
// when done (a bbolt iterator holds a read transaction).
type Iterator[K, V any] interface {
	Next() bool
	Key() K
	Value() V
	Err() error
	Close() error
}

// KeyValue is a key and its value.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Collect drains an iterator into a slice and closes it.
func Collect[K, V any](it Iterator[K, V], err error) ([]KeyValue[K, V], error) {
	if err != nil {
		return nil, err
	}
	var out []KeyValue[K, V]
	for it.Next() {
		out = append(out, KeyValue[K, V]{Key: it.Key(), Value: it.Value()})
	}
	return out, errors.Join(it.Err(), it.Close())
}

// Sentinel errors.
var (
	// ErrLocked: the task's state file is held by another process or goroutine.
	ErrLocked = errors.New("state store file is locked by another owner")
	// ErrClosed: the store set or backend was closed.
	ErrClosed = errors.New("state store is closed")
	// ErrUnknownStore: no store of that name is registered in the set.
	ErrUnknownStore = errors.New("unknown state store")
	// ErrKeyTooLarge: a serialized key is longer than MaxKeySize.
	ErrKeyTooLarge = errors.New("key longer than MaxKeySize (32 KiB)")
	// ErrNullKey: a key serializes to null (nil bytes), as a nil pointer does with
	// serde.Nullable. A store holds no null key: its changelog is compacted, and Kafka
	// refuses a record without a key there (Kafka Streams refuses a null key too).
	ErrNullKey = errors.New("key serializes to null")
)

// StoreError names the store an error happened in.
type StoreError struct {
	Store string
	Op    string
	Err   error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("state store %q: %s: %v", e.Store, e.Op, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }
