package statestore

import "iter"

// Seq exposes seq to the external tests.
func Seq[K, V any](open func() (Iterator[K, V], error)) (iter.Seq2[K, V], func() error) {
	return seq(open)
}
