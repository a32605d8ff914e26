package eddy

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzOffsetsRecord: a value decodes exactly when it is 8 bytes holding an offset >= 0,
// and then encodes back to itself; anything else is an error wrapping
// errBadOffsetsRecord. Every offset >= 0 survives encode then decode.
func FuzzOffsetsRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 42}, int64(0))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(1)<<62)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(-1))
	f.Add([]byte{0, 0, 0, 42}, int64(42))
	f.Add([]byte{}, int64(-1)<<63)
	f.Fuzz(func(t *testing.T, v []byte, offset int64) {
		off, err := decodeOffsetsRecord(v)
		switch {
		case err != nil && !errors.Is(err, errBadOffsetsRecord):
			t.Fatalf("decode(% x): %v does not wrap errBadOffsetsRecord", v, err)
		case err != nil && len(v) == 8 && v[0]&0x80 == 0:
			t.Fatalf("decode(% x) rejected a valid offset: %v", v, err)
		case err == nil && (off < 0 || !bytes.Equal(encodeOffsetsRecord(off), v)):
			t.Fatalf("decode(% x) = %d, which encodes to % x", v, off, encodeOffsetsRecord(off))
		}
		got, err := decodeOffsetsRecord(encodeOffsetsRecord(offset))
		if offset >= 0 && (err != nil || got != offset) {
			t.Fatalf("decode(encode(%d)) = %d, %v", offset, got, err)
		}
		if offset < 0 && err == nil {
			t.Fatalf("decode(encode(%d)) accepted a negative offset as %d", offset, got)
		}
	})
}
