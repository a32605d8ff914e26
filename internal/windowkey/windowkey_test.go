package windowkey

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

// The golden bytes are written out from Kafka Streams' code (WindowKeySchema.toBinary,
// toStoreKeyBinary, SessionKeySchema.writeBinary: ByteBuffer.put(key), putLong, putInt,
// big-endian); the differential tests in integration/kstreams/eddytopo check the same
// layouts against Kafka Streams itself (windowed output keys and changelog keys).
func TestLayouts(t *testing.T) {
	key := []byte("ab")
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"time-windowed", AppendTimeWindowed(nil, key, 0x0102030405060708), "6162" + "0102030405060708"},
		{"window store", AppendWindowStore(nil, key, 1000, 7), "6162" + "00000000000003e8" + "00000007"},
		{"window store max seq", AppendWindowStore(nil, key, 0, math.MaxInt32), "6162" + "0000000000000000" + "7fffffff"},
		{"session end before start", AppendSession(nil, key, 5, 9), "6162" + "0000000000000009" + "0000000000000005"},
		{"negative time", AppendTimeWindowed(nil, nil, -1), "ffffffffffffffff"},
	}
	for _, c := range cases {
		if h := hex.EncodeToString(c.got); h != c.want {
			t.Errorf("%s: % x, want %s", c.name, c.got, c.want)
		}
	}
}

func TestSplitRoundTrip(t *testing.T) {
	for _, key := range [][]byte{{}, []byte("k"), bytes.Repeat([]byte{0xff}, 40)} {
		for _, ts := range []int64{0, 1, 1 << 40, math.MaxInt64, -5} {
			k, start, err := SplitTimeWindowed(AppendTimeWindowed(nil, key, ts))
			if err != nil || !bytes.Equal(k, key) || start != ts {
				t.Fatalf("time-windowed %x %d: %x %d %v", key, ts, k, start, err)
			}
			k, got, seq, err := SplitWindowStore(AppendWindowStore(nil, key, ts, -3))
			if err != nil || !bytes.Equal(k, key) || got != ts || seq != -3 {
				t.Fatalf("window store %x %d: %x %d %d %v", key, ts, k, got, seq, err)
			}
			k, s, e, err := SplitSession(AppendSession(nil, key, ts, ts+2))
			if err != nil || !bytes.Equal(k, key) || s != ts || e != ts+2 {
				t.Fatalf("session %x %d: %x %d %d %v", key, ts, k, s, e, err)
			}
		}
	}
}

func TestShort(t *testing.T) {
	if _, _, err := SplitTimeWindowed(make([]byte, 7)); !errors.Is(err, ErrShort) {
		t.Errorf("time-windowed of 7 bytes: %v", err)
	}
	if _, _, _, err := SplitWindowStore(make([]byte, 11)); !errors.Is(err, ErrShort) {
		t.Errorf("window store key of 11 bytes: %v", err)
	}
	_, _, _, err := SplitSession(make([]byte, 15))
	if !errors.Is(err, ErrShort) {
		t.Fatalf("session key of 15 bytes: %v", err)
	}
	if want := "a session key needs at least 16 bytes (session end and start), got 15"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// TestTimeWindowEnd: Java's timeWindowForSize bounds a negative end to Long.MAX_VALUE.
func TestTimeWindowEnd(t *testing.T) {
	for _, c := range []struct{ start, size, want int64 }{
		{0, 10, 10},
		{math.MaxInt64 - 5, 10, math.MaxInt64},
		{-100, 10, math.MaxInt64},
		{-5, 10, 5},
	} {
		if got := TimeWindowEnd(c.start, c.size); got != c.want {
			t.Errorf("TimeWindowEnd(%d, %d) = %d, want %d", c.start, c.size, got, c.want)
		}
	}
}

// FuzzWindowKeys: every decoder takes any bytes without panicking; bytes it accepts are
// exactly what the encoder makes of the parts (nothing is lost or invented), and it
// refuses only inputs shorter than its suffix.
func FuzzWindowKeys(f *testing.F) {
	f.Add([]byte("ab\x00\x00\x00\x00\x00\x00\x03\xe8\x00\x00\x00\x07"))
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, start, err := SplitTimeWindowed(b)
		if (err != nil) != (len(b) < TimestampSize) {
			t.Fatalf("time-windowed %x: %v", b, err)
		}
		if err == nil && !bytes.Equal(AppendTimeWindowed(nil, k, start), b) {
			t.Fatalf("time-windowed %x does not round-trip", b)
		}
		k, ts, seq, err := SplitWindowStore(b)
		if (err != nil) != (len(b) < WindowSuffix) {
			t.Fatalf("window store %x: %v", b, err)
		}
		if err == nil && !bytes.Equal(AppendWindowStore(nil, k, ts, seq), b) {
			t.Fatalf("window store %x does not round-trip", b)
		}
		k, s, e, err := SplitSession(b)
		if (err != nil) != (len(b) < SessionSuffix) {
			t.Fatalf("session %x: %v", b, err)
		}
		if err == nil && !bytes.Equal(AppendSession(nil, k, s, e), b) {
			t.Fatalf("session %x does not round-trip", b)
		}
	})
}
