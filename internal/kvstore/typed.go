package kvstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// Metrics is the metered layer's hook: the metrics package fills it, nil costs nothing.
type Metrics interface {
	// ObserveOp records one store operation ("get", "put", "delete", "range") and its
	// duration.
	ObserveOp(store, op string, d time.Duration)
}

// NewKeyValueStore makes the typed, metered top of a store over its caching layer.
// topic is the name serdes see (the changelog topic, as in Kafka Streams).
func NewKeyValueStore[K, V any](buf *Buffer, topic string, keys serde.Serde[K], values serde.Serde[V], m Metrics) statestore.KeyValueStore[K, V] {
	return &typedStore[K, V]{buf: buf, topic: topic, keys: keys, values: values, metrics: m}
}

type typedStore[K, V any] struct {
	buf     *Buffer
	topic   string
	keys    serde.Serde[K]
	values  serde.Serde[V]
	metrics Metrics
}

func (s *typedStore[K, V]) Name() string { return s.buf.name }

func (s *typedStore[K, V]) observe(op string, start time.Time) {
	if s.metrics != nil {
		s.metrics.ObserveOp(s.buf.name, op, time.Since(start))
	}
}

func (s *typedStore[K, V]) now() time.Time {
	if s.metrics == nil {
		return time.Time{}
	}
	return time.Now()
}

func (s *typedStore[K, V]) key(k K, op string) ([]byte, error) {
	b, err := s.keys.Serialize(s.topic, k)
	if err != nil {
		return nil, &statestore.StoreError{Store: s.buf.name, Op: op + ": serialize key", Err: err}
	}
	if b == nil {
		return nil, &statestore.StoreError{Store: s.buf.name, Op: op, Err: statestore.ErrNullKey}
	}
	if len(b) > statestore.MaxKeySize {
		// Refused here, before it reaches the changelog: bbolt would refuse it at every
		// flush and every restore after.
		return nil, &statestore.StoreError{Store: s.buf.name, Op: op, Err: fmt.Errorf("%w: serialized key of %d bytes", statestore.ErrKeyTooLarge, len(b))}
	}
	return b, nil
}

func (s *typedStore[K, V]) Get(k K) (V, bool, error) {
	defer s.observe("get", s.now())
	var zero V
	kb, err := s.key(k, "get")
	if err != nil {
		return zero, false, err
	}
	vb, err := s.buf.Get(kb)
	if err != nil || vb == nil {
		return zero, false, err
	}
	v, err := serdes.Deserialize(s.values, s.topic, vb)
	if err != nil {
		return zero, false, &statestore.StoreError{Store: s.buf.name, Op: "get: deserialize value", Err: err}
	}
	return v, true, nil
}

func (s *typedStore[K, V]) Put(k K, v V) error {
	defer s.observe("put", s.now())
	kb, err := s.key(k, "put")
	if err != nil {
		return err
	}
	vb, err := s.values.Serialize(s.topic, v)
	if err != nil {
		return &statestore.StoreError{Store: s.buf.name, Op: "put: serialize value", Err: err}
	}
	s.buf.Put(kb, vb)
	return nil
}

func (s *typedStore[K, V]) PutIfAbsent(k K, v V) (V, bool, error) {
	old, ok, err := s.Get(k)
	if err != nil || ok {
		return old, ok, err
	}
	return old, false, s.Put(k, v)
}

func (s *typedStore[K, V]) Delete(k K) error {
	defer s.observe("delete", s.now())
	kb, err := s.key(k, "delete")
	if err != nil {
		return err
	}
	s.buf.Put(kb, nil)
	return nil
}

func (s *typedStore[K, V]) Range(from, to K) (statestore.Iterator[K, V], error) {
	defer s.observe("range", s.now())
	fb, err := s.key(from, "range")
	if err != nil {
		return nil, err
	}
	tb, err := s.key(to, "range")
	if err != nil {
		return nil, err
	}
	return s.iterate(fb, tb)
}

func (s *typedStore[K, V]) Prefix(prefix K) (statestore.Iterator[K, V], error) {
	defer s.observe("range", s.now())
	pb, err := s.key(prefix, "prefix")
	if err != nil {
		return nil, err
	}
	return s.iterate(pb, prefixEnd(pb))
}

func (s *typedStore[K, V]) All() (statestore.Iterator[K, V], error) {
	defer s.observe("range", s.now())
	return s.iterate(nil, nil)
}

func (s *typedStore[K, V]) iterate(from, to []byte) (statestore.Iterator[K, V], error) {
	if len(from) == 0 {
		from = nil // the empty key is the smallest: an open lower bound
	}
	if to != nil && from != nil && bytes.Compare(from, to) >= 0 {
		return &typedIterator[K, V]{s: s, it: &sliceIterator{}}, nil
	}
	it, err := s.buf.Iterate(from, to)
	if err != nil {
		return nil, err
	}
	return &typedIterator[K, V]{s: s, it: it}, nil
}

func (s *typedStore[K, V]) ApproximateCount() (int64, error) { return s.buf.Count() }

// prefixEnd returns the smallest key greater than every key starting with p, or nil
// (unbounded) when p is all 0xff bytes.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

type typedIterator[K, V any] struct {
	s   *typedStore[K, V]
	it  BytesIterator
	k   K
	v   V
	err error
}

func (t *typedIterator[K, V]) Next() bool {
	if t.err != nil || !t.it.Next() {
		return false
	}
	// The bytes of a backend iterator are valid only until its next step (bbolt's point
	// into a read transaction), and a serde may keep them (Bytes does): hand it copies.
	var err error
	if t.k, err = serdes.Deserialize(t.s.keys, t.s.topic, bytes.Clone(t.it.Key())); err != nil {
		t.err = &statestore.StoreError{Store: t.s.buf.name, Op: "iterate: deserialize key", Err: err}
		return false
	}
	if t.v, err = serdes.Deserialize(t.s.values, t.s.topic, bytes.Clone(t.it.Value())); err != nil {
		t.err = &statestore.StoreError{Store: t.s.buf.name, Op: "iterate: deserialize value", Err: err}
		return false
	}
	return true
}

func (t *typedIterator[K, V]) Key() K   { return t.k }
func (t *typedIterator[K, V]) Value() V { return t.v }

func (t *typedIterator[K, V]) Err() error {
	if t.err != nil {
		return t.err
	}
	return t.it.Err()
}

func (t *typedIterator[K, V]) Close() error { return t.it.Close() }
