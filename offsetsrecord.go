package eddy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errBadOffsetsRecord is wrapped by the error of an offsets record value that is not
// an offset (see "The offsets record" in taskrunner.go).
var errBadOffsetsRecord = errors.New("bad offsets record")

// encodeOffsetsRecord is the value of an offsets record: the offset, 8 bytes big-endian.
func encodeOffsetsRecord(offset int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(offset))
}

// decodeOffsetsRecord reads the value of an offsets record. The topic is eddy's own, but
// its bytes still come from the broker: a value of another length or a negative offset
// (never written: offsets start at 0) is an error, and the caller falls back to the
// group's committed offset.
func decodeOffsetsRecord(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %d bytes, want 8", errBadOffsetsRecord, len(v))
	}
	off := int64(binary.BigEndian.Uint64(v))
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", errBadOffsetsRecord, off)
	}
	return off, nil
}
