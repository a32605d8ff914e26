// Package windowkey holds the byte layouts of windowed keys, equal to Kafka Streams'
// (4.1.1, org.apache.kafka.streams.state.internals.WindowKeySchema and SessionKeySchema),
// so that a Java consumer reads what eddy writes and the other way round:
//
//	windowed output key (TimeWindowedSerde)     key | start (8)
//	session output key (SessionWindowedSerde)   key | end (8) | start (8)
//	window store changelog key                  key | timestamp (8) | sequence number (4)
//	session store changelog key                 key | end (8) | start (8)
//
// Times are milliseconds since the epoch, big-endian two's complement (Java's
// ByteBuffer.putLong); the sequence number is a big-endian int32 (putInt). The key is
// the inner key serde's bytes; its length is what remains before the fixed suffix,
// which is why the suffix goes last: the key needs no length prefix.
//
// A session key puts the end before the start so that, within a key, sessions sort by
// end: a search for sessions that may overlap [earliest end, latest start] is one range
// (Kafka Streams' comment in SessionKeySchema.writeBinary).
package windowkey

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Sizes of the fixed suffixes.
const (
	TimestampSize = 8
	SeqnumSize    = 4
	// WindowSuffix is the suffix of a window store key: timestamp and sequence number.
	WindowSuffix = TimestampSize + SeqnumSize
	// SessionSuffix is the suffix of a session key: end and start.
	SessionSuffix = 2 * TimestampSize
)

// ErrShort is wrapped by the error of a decoder given fewer bytes than the fixed suffix
// of its layout: the bytes were not written in that layout (a topic read with the wrong
// serde, or a changelog of another kind of store).
var ErrShort = errors.New("windowed key shorter than its fixed suffix")

func short(what string, n, want int) error {
	return fmt.Errorf("%w: a %s needs at least %d bytes (%s), got %d; check that the topic holds that kind of key",
		ErrShort, what, want, suffixName(what), n)
}

func suffixName(what string) string {
	switch what {
	case "time-windowed key":
		return "the window start"
	case "window store key":
		return "timestamp and sequence number"
	default:
		return "session end and start"
	}
}

// AppendTimeWindowed appends key | start: WindowKeySchema.toBinary, the layout of
// TimeWindowedSerializer.
func AppendTimeWindowed(dst, key []byte, start int64) []byte {
	dst = append(dst, key...)
	return binary.BigEndian.AppendUint64(dst, uint64(start))
}

// SplitTimeWindowed splits a TimeWindowedSerializer key into the inner key's bytes
// (a sub-slice of b) and the window start.
func SplitTimeWindowed(b []byte) (key []byte, start int64, err error) {
	if len(b) < TimestampSize {
		return nil, 0, short("time-windowed key", len(b), TimestampSize)
	}
	n := len(b) - TimestampSize
	return b[:n:n], int64(binary.BigEndian.Uint64(b[n:])), nil
}

// TimeWindowEnd is the end of a time window of the given size that starts at start,
// start+size, or math.MaxInt64 where that is negative, as WindowKeySchema.timeWindowForSize
// has it (meant for overflow; a window start from Kafka Streams is never negative, but
// bytes from a topic may say anything, and this gives the window Java would).
func TimeWindowEnd(start, size int64) int64 {
	end := start + size
	if end < 0 {
		return math.MaxInt64
	}
	return end
}

// AppendWindowStore appends key | timestamp | seqnum: WindowKeySchema.toStoreKeyBinary,
// the key of a window store's changelog. Kafka Streams' window stores write seqnum 0
// unless they keep duplicates (the buffers of stream-stream joins).
func AppendWindowStore(dst, key []byte, ts int64, seqnum int32) []byte {
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	return binary.BigEndian.AppendUint32(dst, uint32(seqnum))
}

// SplitWindowStore splits a window store key into the inner key's bytes (a sub-slice
// of b), the timestamp (the window start) and the sequence number.
func SplitWindowStore(b []byte) (key []byte, ts int64, seqnum int32, err error) {
	if len(b) < WindowSuffix {
		return nil, 0, 0, short("window store key", len(b), WindowSuffix)
	}
	n := len(b) - WindowSuffix
	return b[:n:n], int64(binary.BigEndian.Uint64(b[n:])), int32(binary.BigEndian.Uint32(b[n+TimestampSize:])), nil
}

// AppendSession appends key | end | start: SessionKeySchema.toBinary, both the key of a
// session store's changelog and the layout of SessionWindowedSerializer.
func AppendSession(dst, key []byte, start, end int64) []byte {
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(end))
	return binary.BigEndian.AppendUint64(dst, uint64(start))
}

// SplitSession splits a session key into the inner key's bytes (a sub-slice of b), the
// session's start and its end.
func SplitSession(b []byte) (key []byte, start, end int64, err error) {
	if len(b) < SessionSuffix {
		return nil, 0, 0, short("session key", len(b), SessionSuffix)
	}
	n := len(b) - SessionSuffix
	return b[:n:n], int64(binary.BigEndian.Uint64(b[n+TimestampSize:])), int64(binary.BigEndian.Uint64(b[n:])), nil
}
