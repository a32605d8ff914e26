package window_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/window"
)

const topic = "t"

// TestWindowsForMatchesDefinition compares TimeWindows.WindowsFor with the definition:
// every start that is a multiple of the advance, not before the epoch, with start <= ts
// < start+size.
func TestWindowsForMatchesDefinition(t *testing.T) {
	for _, w := range []window.TimeWindows{
		window.Tumbling(10*time.Millisecond, 0),
		window.Hopping(10*time.Millisecond, 3*time.Millisecond, 0),
		window.Hopping(10*time.Millisecond, 5*time.Millisecond, time.Second),
		window.Hopping(7*time.Millisecond, 1*time.Millisecond, 0),
	} {
		for ts := int64(0); ts < 60; ts++ {
			var want []int64
			for s := int64(0); s <= ts; s += w.AdvanceMs() {
				if ts < s+w.SizeMs() {
					want = append(want, s)
				}
			}
			if got := w.WindowsFor(ts); !slices.Equal(got, want) {
				t.Fatalf("size %d advance %d ts %d: %v, want %v", w.SizeMs(), w.AdvanceMs(), ts, got, want)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]error{
		"the size must be at least 1 ms":             window.Tumbling(0, 0).Validate(),
		"the advance must be at least 1 ms":          window.Hopping(10*time.Millisecond, 11*time.Millisecond, 0).Validate(),
		"time windows: the grace period":             window.Tumbling(time.Second, -time.Millisecond).Validate(),
		"the time difference must not be negative":   window.Sliding(-time.Millisecond, 0).Validate(),
		"sliding windows: the grace period":          window.Sliding(time.Second, -time.Second).Validate(),
		"the inactivity gap must be at least 1 ms":   window.Sessions(time.Microsecond, 0).Validate(),
		"session windows: the grace period must not": window.Sessions(time.Second, -time.Second).Validate(),
	}
	for want, err := range bad {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error saying %q, got %v", want, err)
		}
	}
	for _, err := range []error{
		window.Tumbling(time.Minute, 0).Validate(),
		window.Hopping(time.Minute, time.Second, time.Hour).Validate(),
		window.Sliding(0, 0).Validate(),
		window.Sessions(time.Millisecond, 0).Validate(),
	} {
		if err != nil {
			t.Errorf("valid windows refused: %v", err)
		}
	}
}

// The golden bytes follow Kafka Streams' TimeWindowedSerializer (key, then start as a
// big-endian long) and SessionWindowedSerializer (key, end, start); the differential
// suite (integration/kstreams/eddytopo) checks them against Kafka Streams' own output.
func TestWindowedSerdeBytes(t *testing.T) {
	tw := window.TimeWindowedSerde(serde.String(), 10*time.Millisecond)
	w := window.Windowed[string]{Key: "ab", Window: window.At(1000, 1010)}
	b, err := tw.Serialize(topic, w)
	if err != nil || hex.EncodeToString(b) != "6162"+"00000000000003e8" {
		t.Fatalf("time-windowed: % x %v", b, err)
	}
	back, err := tw.Deserialize(topic, b)
	if err != nil || back != w {
		t.Fatalf("time-windowed back: %+v %v", back, err)
	}
	sw := window.SessionWindowedSerde(serde.String())
	s := window.Windowed[string]{Key: "ab", Window: window.At(1000, 1500)}
	b, err = sw.Serialize(topic, s)
	if err != nil || hex.EncodeToString(b) != "6162"+"00000000000005dc"+"00000000000003e8" {
		t.Fatalf("session-windowed: % x %v", b, err)
	}
	sback, err := sw.Deserialize(topic, b)
	if err != nil || sback != s {
		t.Fatalf("session-windowed back: %+v %v", sback, err)
	}
}

// TestTimeWindowedEndFromSize: the end is not on the wire; the deserializer makes it
// start+size, and the largest time where that overflows (Kafka Streams'
// timeWindowForSize).
func TestTimeWindowedEndFromSize(t *testing.T) {
	tw := window.TimeWindowedSerde(serde.String(), time.Minute)
	b := append([]byte("k"), 0, 0, 0, 0, 0, 0, 0x27, 0x10) // start 10000
	w, err := tw.Deserialize(topic, b)
	if err != nil || w.Window.StartMs() != 10000 || w.Window.EndMs() != 70000 {
		t.Fatalf("%+v %v", w, err)
	}
	b = append([]byte("k"), 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0)
	w, err = tw.Deserialize(topic, b)
	if err != nil || w.Window.EndMs() != math.MaxInt64 {
		t.Fatalf("overflow: %+v %v", w, err)
	}
}

func TestWindowedSerdeErrors(t *testing.T) {
	tw := window.TimeWindowedSerde(serde.String(), time.Minute)
	sw := window.SessionWindowedSerde(serde.String())
	if _, err := tw.Deserialize(topic, nil); !errors.Is(err, serde.ErrTombstone) {
		t.Errorf("time-windowed nil: %v", err)
	}
	if _, err := sw.Deserialize(topic, []byte("short")); err == nil || !strings.Contains(err.Error(), "SessionWindowed[String]") || !strings.Contains(err.Error(), "session key needs at least 16 bytes") {
		t.Errorf("session-windowed short: %v", err)
	}
	np := window.TimeWindowedSerde(serde.Nullable(serde.String()), time.Minute)
	if _, err := np.Serialize(topic, window.Windowed[*string]{}); !errors.Is(err, window.ErrNullInnerKey) {
		t.Errorf("null inner key: %v", err)
	}
	i64 := window.SessionWindowedSerde(serde.Int64())
	var se *serde.Error
	if _, err := i64.Deserialize(topic, make([]byte, 19)); !errors.As(err, &se) || se.Serde != "SessionWindowed[Int64]" || !strings.Contains(err.Error(), "inner key") {
		t.Errorf("inner key of 3 bytes for Int64: %v", err)
	}
}

// FuzzTimeWindowedSerde: any bytes in; accepted bytes serialize back to themselves;
// refused bytes give a *serde.Error naming the serde.
func FuzzTimeWindowedSerde(f *testing.F) {
	f.Add([]byte("ab\x00\x00\x00\x00\x00\x00\x03\xe8"), int64(10))
	f.Add([]byte{1, 2}, int64(1))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		s := window.TimeWindowedSerde(serde.Bytes(), time.Duration(size)*time.Millisecond)
		w, err := s.Deserialize(topic, data)
		if err != nil {
			var se *serde.Error
			if !errors.As(err, &se) || se.Serde != "TimeWindowed[Bytes]" {
				t.Fatalf("error %v is not a *serde.Error of TimeWindowed[Bytes]", err)
			}
			return
		}
		back, err := s.Serialize(topic, w)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("% x -> %+v -> % x %v", data, w, back, err)
		}
	})
}

// FuzzSessionWindowedSerde: as FuzzTimeWindowedSerde, for session keys.
func FuzzSessionWindowedSerde(f *testing.F) {
	f.Add([]byte("ab\x00\x00\x00\x00\x00\x00\x05\xdc\x00\x00\x00\x00\x00\x00\x03\xe8"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := window.SessionWindowedSerde(serde.String())
		w, err := s.Deserialize(topic, data)
		if err != nil {
			var se *serde.Error
			if !errors.As(err, &se) || se.Serde != "SessionWindowed[String]" {
				t.Fatalf("error %v is not a *serde.Error of SessionWindowed[String]", err)
			}
			return
		}
		back, err := s.Serialize(topic, w)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("% x -> %+v -> % x %v", data, w, back, err)
		}
	})
}

func TestJoinWindows(t *testing.T) {
	w := window.JoinTimeDifference(5*time.Second, 2*time.Second)
	if w.BeforeMs() != 5000 || w.AfterMs() != 5000 || w.GraceMs() != 2000 || w.SizeMs() != 10000 {
		t.Fatalf("JoinTimeDifference(5 s, 2 s) = %v", w)
	}
	a := w.Before(time.Second).After(3 * time.Second)
	if a.String() != "JoinWindows{beforeMs=1000, afterMs=3000, graceMs=2000}" || a.SizeMs() != 4000 || a.Validate() != nil {
		t.Fatalf("Before(1 s).After(3 s) = %v", a)
	}
	if err := w.Before(-6 * time.Second).Validate(); err == nil {
		t.Fatal("before + after < 0 accepted")
	}
	if err := w.Before(-5 * time.Second).Validate(); err != nil {
		t.Fatalf("before + after = 0 refused: %v", err)
	}
	if err := window.JoinTimeDifference(time.Second, -time.Millisecond).Validate(); err == nil {
		t.Fatal("negative grace accepted")
	}
}
