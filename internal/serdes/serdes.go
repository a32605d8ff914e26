// Package serdes runs user serdes on bytes that come from outside the process.
package serdes

import (
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// Deserialize runs a deserializer on bytes read from a topic (a record, or a store's
// value restored from its changelog), turning a panic into an error: a *serde.Error
// wrapping serde.ErrPanicked and the panic value. A user's serde may panic on bytes it
// did not expect (an index out of range on a short record); as in Kafka Streams, where
// the deserialization exception handler sees any RuntimeException a deserializer
// throws, such bytes then get the handling of bytes the serde rejected (the bad-record
// policy for input records) instead of crashing the process on every restart.
func Deserialize[T any](d serde.Deserializer[T], topic string, data []byte) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v = zero
			err = &serde.Error{Serde: name(d), Op: "deserialize", Topic: topic, Err: fmt.Errorf("%w: %v", serde.ErrPanicked, p)}
		}
	}()
	return d.Deserialize(topic, data)
}

func name[T any](d serde.Deserializer[T]) string {
	if n, ok := d.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", d)
}
