package statestore

import (
	"errors"
	"iter"
)

// All returns every key-value pair of the store in key byte order as a sequence for a
// range loop, and a function giving the error that ended the loop's iteration (nil when
// it ran to the end or the loop broke off without an error):
//
//	pairs, iterErr := statestore.All(store)
//	for k, v := range pairs {
//		...
//	}
//	if err := iterErr(); err != nil {
//		return err
//	}
//
// Each range over the sequence opens an iterator of the store and closes it when the
// loop ends, breaks, returns or panics, so no read transaction outlives the loop; the
// error function reports the last range's error (opening, deserializing, reading or
// closing). A sequence is for one goroutine, like the store.
func All[K, V any](s KeyValueStore[K, V]) (iter.Seq2[K, V], func() error) {
	return seq(s.All)
}

// Range is [All] for the keys whose serialized bytes lie in [from, to)
// (KeyValueStore.Range).
func Range[K, V any](s KeyValueStore[K, V], from, to K) (iter.Seq2[K, V], func() error) {
	return seq(func() (Iterator[K, V], error) { return s.Range(from, to) })
}

// Prefix is [All] for the keys whose serialized bytes start with those of prefix
// (KeyValueStore.Prefix).
func Prefix[K, V any](s KeyValueStore[K, V], prefix K) (iter.Seq2[K, V], func() error) {
	return seq(func() (Iterator[K, V], error) { return s.Prefix(prefix) })
}

// seq adapts an Iterator to a range loop as [All] does: open is called when a range
// starts, and the iterator it returns is closed when the range ends.
func seq[K, V any](open func() (Iterator[K, V], error)) (iter.Seq2[K, V], func() error) {
	var err error
	sq := func(yield func(K, V) bool) {
		err = nil
		it, oerr := open()
		if oerr != nil {
			err = oerr
			return
		}
		defer func() { err = errors.Join(err, it.Close()) }()
		for it.Next() {
			if !yield(it.Key(), it.Value()) {
				return
			}
		}
		err = it.Err()
	}
	return sq, func() error { return err }
}
