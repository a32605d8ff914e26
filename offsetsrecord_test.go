package eddy

import (
	"bytes"
	"errors"
	"testing"

	"github.com/IBM/sarama"
)

// FuzzOffsetsRecord: a value decodes exactly when it is 8 bytes (an offset) or 24 bytes
// (an offset and a topic ID) with an offset >= 0, and then encodes back to itself (a zero
// ID encodes as no ID); anything else is an error wrapping errBadOffsetRecord. Every
// offset >= 0 survives encode then decode, with and without an ID.
func FuzzOffsetsRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 42}, int64(0))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(1)<<62)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(-1))
	f.Add([]byte{0, 0, 0, 42}, int64(42))
	f.Add([]byte{}, int64(-1)<<63)
	f.Add(append([]byte{0, 0, 0, 0, 0, 0, 0, 7}, bytes.Repeat([]byte{0xab}, 16)...), int64(7))
	f.Fuzz(func(t *testing.T, v []byte, offset int64) {
		off, id, err := decodeOffset(v)
		valid := (len(v) == 8 || len(v) == 24) && v[0]&0x80 == 0
		switch {
		case err != nil && !errors.Is(err, errBadOffsetRecord):
			t.Fatalf("decode(% x): %v does not wrap errBadOffsetRecord", v, err)
		case err != nil && valid:
			t.Fatalf("decode(% x) rejected a valid record: %v", v, err)
		case err == nil && !valid:
			t.Fatalf("decode(% x) accepted an invalid record as %d", v, off)
		case err == nil:
			want := v
			if id == (sarama.Uuid{}) {
				want = v[:8]
			}
			if got := encodeOffset(off, id); !bytes.Equal(got, want) {
				t.Fatalf("decode(% x) = %d, %x, which encodes to % x", v, off, id, got)
			}
		}
		for _, id := range []sarama.Uuid{{}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}} {
			got, gotID, err := decodeOffset(encodeOffset(offset, id))
			if offset >= 0 && (err != nil || got != offset || gotID != id) {
				t.Fatalf("decode(encode(%d, %x)) = %d, %x, %v", offset, id, got, gotID, err)
			}
			if offset < 0 && err == nil {
				t.Fatalf("decode(encode(%d)) accepted a negative offset as %d", offset, got)
			}
		}
	})
}
