package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/internal/windowkey"
	"github.com/eddy-streams/eddy/serde"
)

// ErrNullInnerKey is wrapped by the error of a windowed serde whose inner key serde
// turned a key into null (nil bytes): a windowed key needs the key's bytes before its
// window (Kafka Streams fails on it too).
var ErrNullInnerKey = errors.New("the inner key serializes to null")

// TimeWindowedSerde serializes time-windowed keys as Kafka Streams'
// WindowedSerdes.timeWindowedSerdeFrom(type, size) does: the inner key's bytes, then the
// window start as 8 bytes of big-endian milliseconds. The end is not written: the
// deserializer sets it to start+size (or the largest time where that overflows), so size
// must be the windows' size. A sliding window's size is its time difference.
func TimeWindowedSerde[K any](keys serde.Serde[K], size time.Duration) serde.Serde[Windowed[K]] {
	name := "TimeWindowed[" + serde.Name(keys) + "]"
	sizeMs := size.Milliseconds()
	return serde.Funcs(name,
		func(topic string, w Windowed[K]) ([]byte, error) {
			kb, err := innerKey(keys, topic, w.Key)
			if err != nil {
				return nil, err
			}
			return windowkey.AppendTimeWindowed(make([]byte, 0, len(kb)+windowkey.TimestampSize), kb, w.Window.StartMs()), nil
		},
		func(topic string, data []byte) (Windowed[K], error) {
			if data == nil {
				return Windowed[K]{}, serde.ErrTombstone
			}
			kb, start, err := windowkey.SplitTimeWindowed(data)
			if err != nil {
				return Windowed[K]{}, err
			}
			k, err := keys.Deserialize(topic, kb)
			if err != nil {
				return Windowed[K]{}, fmt.Errorf("inner key: %w", err)
			}
			return Windowed[K]{Key: k, Window: At(start, windowkey.TimeWindowEnd(start, sizeMs))}, nil
		})
}

// SessionWindowedSerde serializes session-windowed keys as Kafka Streams'
// WindowedSerdes.sessionWindowedSerdeFrom does: the inner key's bytes, then the
// session's end and its start, each 8 bytes of big-endian milliseconds.
func SessionWindowedSerde[K any](keys serde.Serde[K]) serde.Serde[Windowed[K]] {
	name := "SessionWindowed[" + serde.Name(keys) + "]"
	return serde.Funcs(name,
		func(topic string, w Windowed[K]) ([]byte, error) {
			kb, err := innerKey(keys, topic, w.Key)
			if err != nil {
				return nil, err
			}
			return windowkey.AppendSession(make([]byte, 0, len(kb)+windowkey.SessionSuffix), kb, w.Window.StartMs(), w.Window.EndMs()), nil
		},
		func(topic string, data []byte) (Windowed[K], error) {
			if data == nil {
				return Windowed[K]{}, serde.ErrTombstone
			}
			kb, start, end, err := windowkey.SplitSession(data)
			if err != nil {
				return Windowed[K]{}, err
			}
			k, err := keys.Deserialize(topic, kb)
			if err != nil {
				return Windowed[K]{}, fmt.Errorf("inner key: %w", err)
			}
			return Windowed[K]{Key: k, Window: At(start, end)}, nil
		})
}

func innerKey[K any](keys serde.Serde[K], topic string, k K) ([]byte, error) {
	kb, err := keys.Serialize(topic, k)
	if err != nil {
		return nil, fmt.Errorf("inner key: %w", err)
	}
	if kb == nil {
		return nil, ErrNullInnerKey
	}
	return kb, nil
}
