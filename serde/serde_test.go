package serde_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eddy-streams/eddy/serde"
)

const topic = "some-topic"

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkJava checks that s serializes v to the bytes Kafka's Java serializer writes for
// it, and that those bytes deserialize back to v.
func checkJava[T comparable](t *testing.T, s serde.Serde[T], v T, javaHex string) {
	t.Helper()
	want := unhex(t, javaHex)
	got, err := s.Serialize(topic, v)
	if err != nil {
		t.Fatalf("%s: Serialize(%v): %v", serde.Name(s), v, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: Serialize(%v) = % x, Java writes % x", serde.Name(s), v, got, want)
	}
	back, err := s.Deserialize(topic, want)
	if err != nil {
		t.Fatalf("%s: Deserialize(% x): %v", serde.Name(s), want, err)
	}
	if back != v {
		t.Errorf("%s: Deserialize(% x) = %v, want %v", serde.Name(s), want, back, v)
	}
}

// The vectors are what org.apache.kafka.common.serialization.LongSerializer,
// IntegerSerializer, DoubleSerializer and StringSerializer write: big-endian two's
// complement, Double.doubleToLongBits, UTF-8.
func TestJavaCompatibleInt64(t *testing.T) {
	for _, c := range []struct {
		v   int64
		hex string
	}{
		{0, "00 00 00 00 00 00 00 00"},
		{1, "00 00 00 00 00 00 00 01"},
		{-1, "ff ff ff ff ff ff ff ff"},
		{256, "00 00 00 00 00 00 01 00"},
		{0x0102030405060708, "01 02 03 04 05 06 07 08"},
		{math.MaxInt64, "7f ff ff ff ff ff ff ff"},
		{math.MinInt64, "80 00 00 00 00 00 00 00"},
		{-2, "ff ff ff ff ff ff ff fe"},
	} {
		checkJava(t, serde.Int64(), c.v, c.hex)
	}
}

func TestJavaCompatibleInt32(t *testing.T) {
	for _, c := range []struct {
		v   int32
		hex string
	}{
		{0, "00 00 00 00"},
		{1, "00 00 00 01"},
		{-1, "ff ff ff ff"},
		{0x01020304, "01 02 03 04"},
		{math.MaxInt32, "7f ff ff ff"},
		{math.MinInt32, "80 00 00 00"},
	} {
		checkJava(t, serde.Int32(), c.v, c.hex)
	}
}

func TestJavaCompatibleFloat64(t *testing.T) {
	for _, c := range []struct {
		v   float64
		hex string
	}{
		{0, "00 00 00 00 00 00 00 00"},
		{1, "3f f0 00 00 00 00 00 00"},
		{-2.5, "c0 04 00 00 00 00 00 00"},
		{0.1, "3f b9 99 99 99 99 99 9a"},
		{math.Inf(1), "7f f0 00 00 00 00 00 00"},
		{math.Inf(-1), "ff f0 00 00 00 00 00 00"},
		{math.MaxFloat64, "7f ef ff ff ff ff ff ff"},
		{math.SmallestNonzeroFloat64, "00 00 00 00 00 00 00 01"},
	} {
		checkJava(t, serde.Float64(), c.v, c.hex)
	}

	// -0.0 equals 0.0 in Go, so check its bytes and sign separately.
	b, err := serde.Float64().Serialize(topic, math.Copysign(0, -1))
	if err != nil || !bytes.Equal(b, unhex(t, "80 00 00 00 00 00 00 00")) {
		t.Errorf("Serialize(-0.0) = % x, %v; Java writes 80 00 00 00 00 00 00 00", b, err)
	}
	v, err := serde.Float64().Deserialize(topic, b)
	if err != nil || !math.Signbit(v) || v != 0 {
		t.Errorf("Deserialize(% x) = %v, %v; want -0.0", b, v, err)
	}

	// Double.doubleToLongBits writes every NaN as 7ff8000000000000; Go's math.NaN()
	// has another bit pattern, which must not leak into the bytes.
	for _, nan := range []float64{math.NaN(), math.Float64frombits(0x7ff0000000000001), math.Float64frombits(0xfff8000000000000)} {
		b, err := serde.Float64().Serialize(topic, nan)
		if err != nil || !bytes.Equal(b, unhex(t, "7f f8 00 00 00 00 00 00")) {
			t.Errorf("Serialize(NaN %x) = % x, %v; Java writes 7f f8 00 00 00 00 00 00", math.Float64bits(nan), b, err)
		}
		v, err := serde.Float64().Deserialize(topic, b)
		if err != nil || !math.IsNaN(v) {
			t.Errorf("Deserialize(% x) = %v, %v; want NaN", b, v, err)
		}
	}
}

func TestJavaCompatibleString(t *testing.T) {
	for _, c := range []struct {
		v   string
		hex string
	}{
		{"", ""},
		{"hello", "68 65 6c 6c 6f"},
		{"Straße", "53 74 72 61 c3 9f 65"},
		{"ÉCOLE", "c3 89 43 4f 4c 45"},
		{"日本", "e6 97 a5 e6 9c ac"},
		{"😀", "f0 9f 98 80"},
	} {
		checkJava(t, serde.String(), c.v, c.hex)
	}
	// The empty string is zero bytes, not null: it must not become a tombstone.
	b, err := serde.String().Serialize(topic, "")
	if err != nil || b == nil {
		t.Errorf(`Serialize("") = %#v, %v; want non-nil empty bytes`, b, err)
	}
}

func TestBytesIsIdentity(t *testing.T) {
	s := serde.Bytes()
	for _, in := range [][]byte{nil, {}, {0}, {0xff, 0x00, 0x7f}} {
		b, err := s.Serialize(topic, in)
		if err != nil || !bytes.Equal(b, in) || (in == nil) != (b == nil) {
			t.Errorf("Serialize(%#v) = %#v, %v", in, b, err)
		}
		v, err := s.Deserialize(topic, in)
		if err != nil || !bytes.Equal(v, in) || (in == nil) != (v == nil) {
			t.Errorf("Deserialize(%#v) = %#v, %v", in, v, err)
		}
	}
}

// Every serde of a type without nil refuses a tombstone with ErrTombstone, naming itself
// and the topic.
func TestTombstoneRefused(t *testing.T) {
	type event struct{ ID int }
	for name, de := range map[string]func() error{
		"String":                 func() error { _, err := serde.String().Deserialize(topic, nil); return err },
		"Int64":                  func() error { _, err := serde.Int64().Deserialize(topic, nil); return err },
		"Int32":                  func() error { _, err := serde.Int32().Deserialize(topic, nil); return err },
		"Float64":                func() error { _, err := serde.Float64().Deserialize(topic, nil); return err },
		"JSON[serde_test.event]": func() error { _, err := serde.JSON[event]().Deserialize(topic, nil); return err },
		"JSON[int]":              func() error { _, err := serde.JSON[int]().Deserialize(topic, nil); return err },
	} {
		err := de()
		if !errors.Is(err, serde.ErrTombstone) {
			t.Errorf("%s: Deserialize(nil) = %v, want an error wrapping ErrTombstone", name, err)
			continue
		}
		if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), topic) {
			t.Errorf("%s: error %q does not name the serde and topic", name, err)
		}
	}
}

func TestNullable(t *testing.T) {
	s := serde.Nullable(serde.Int64())
	b, err := s.Serialize(topic, nil)
	if err != nil || b != nil {
		t.Fatalf("Serialize(nil) = %#v, %v; want nil bytes (a tombstone)", b, err)
	}
	v, err := s.Deserialize(topic, nil)
	if err != nil || v != nil {
		t.Fatalf("Deserialize(nil) = %v, %v; want nil", v, err)
	}
	seven := int64(7)
	b, err = s.Serialize(topic, &seven)
	if err != nil || !bytes.Equal(b, unhex(t, "00 00 00 00 00 00 00 07")) {
		t.Fatalf("Serialize(&7) = % x, %v", b, err)
	}
	v, err = s.Deserialize(topic, b)
	if err != nil || v == nil || *v != 7 {
		t.Fatalf("Deserialize(% x) = %v, %v; want &7", b, v, err)
	}
	// Empty bytes are a value (an empty string), not a tombstone.
	str, err := serde.Nullable(serde.String()).Deserialize(topic, []byte{})
	if err != nil || str == nil || *str != "" {
		t.Fatalf("Nullable[String].Deserialize(empty) = %v, %v; want a pointer to \"\"", str, err)
	}
	if got := serde.Name(s); got != "Nullable[Int64]" {
		t.Errorf("Name = %q", got)
	}
	// An inner error keeps the inner serde's name and the topic.
	_, err = s.Deserialize(topic, []byte{1, 2})
	var se *serde.Error
	if !errors.As(err, &se) || se.Serde != "Int64" || se.Topic != topic || se.Op != "deserialize" {
		t.Errorf("Deserialize(2 bytes) = %v; want a *serde.Error of Int64 on %q", err, topic)
	}
}

func TestJSONTombstones(t *testing.T) {
	type event struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	// A struct has no nil: a tombstone is an error, and a value always has bytes.
	st := serde.JSON[event]()
	b, err := st.Serialize(topic, event{ID: 1, Name: "a"})
	if err != nil || string(b) != `{"id":1,"name":"a"}` {
		t.Fatalf("Serialize(struct) = %s, %v", b, err)
	}
	e, err := st.Deserialize(topic, b)
	if err != nil || e != (event{ID: 1, Name: "a"}) {
		t.Fatalf("Deserialize = %+v, %v", e, err)
	}
	if _, err := st.Deserialize(topic, nil); !errors.Is(err, serde.ErrTombstone) {
		t.Fatalf("struct Deserialize(nil) = %v; want ErrTombstone", err)
	}

	// A pointer has: nil is a tombstone both ways.
	pt := serde.JSON[*event]()
	b, err = pt.Serialize(topic, nil)
	if err != nil || b != nil {
		t.Fatalf("pointer Serialize(nil) = %#v, %v; want nil bytes", b, err)
	}
	p, err := pt.Deserialize(topic, nil)
	if err != nil || p != nil {
		t.Fatalf("pointer Deserialize(nil) = %v, %v; want nil", p, err)
	}
	p, err = pt.Deserialize(topic, []byte(`{"id":2}`))
	if err != nil || p == nil || p.ID != 2 {
		t.Fatalf("pointer Deserialize = %+v, %v", p, err)
	}
	// So do maps and slices.
	ms := serde.JSON[map[string]int]()
	if b, err := ms.Serialize(topic, nil); err != nil || b != nil {
		t.Fatalf("map Serialize(nil) = %#v, %v", b, err)
	}
	if b, err := ms.Serialize(topic, map[string]int{}); err != nil || string(b) != "{}" {
		t.Fatalf("map Serialize(empty) = %s, %v; an empty map is a value, not a tombstone", b, err)
	}

	// Bad JSON names the serde (with its type) and the topic.
	_, err = st.Deserialize(topic, []byte("{not json"))
	var se *serde.Error
	if !errors.As(err, &se) || se.Serde != "JSON[serde_test.event]" || se.Topic != topic || se.Op != "deserialize" {
		t.Fatalf("bad JSON: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "JSON[serde_test.event]") || !strings.Contains(msg, topic) {
		t.Fatalf("bad JSON error %q does not name serde and topic", msg)
	}
	// A value encoding/json cannot encode fails to serialize, named likewise.
	_, err = serde.JSON[func()]().Serialize(topic, func() {})
	if !errors.As(err, &se) || se.Op != "serialize" || se.Topic != topic {
		t.Fatalf("Serialize(func) = %v; want a *serde.Error", err)
	}
}

func TestErrorsNameSerdeAndTopic(t *testing.T) {
	for _, c := range []struct {
		name string
		err  func() error
	}{
		{"Int64", func() error { _, err := serde.Int64().Deserialize("t-int64", []byte{1, 2, 3}); return err }},
		{"Int32", func() error { _, err := serde.Int32().Deserialize("t-int32", []byte{1, 2, 3, 4, 5}); return err }},
		{"Float64", func() error { _, err := serde.Float64().Deserialize("t-float64", []byte{1}); return err }},
	} {
		err := c.err()
		var se *serde.Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: %v is not a *serde.Error", c.name, err)
		}
		if se.Serde != c.name || se.Topic != "t-"+strings.ToLower(c.name) || se.Op != "deserialize" {
			t.Errorf("%s: got %+v", c.name, se)
		}
		if msg := err.Error(); !strings.Contains(msg, c.name) || !strings.Contains(msg, se.Topic) || !strings.Contains(msg, "bytes") {
			t.Errorf("%s: message %q should name serde, topic and the size problem", c.name, msg)
		}
	}
}

func TestFuncs(t *testing.T) {
	boom := errors.New("boom")
	s := serde.Funcs("Upper",
		func(_ string, v string) ([]byte, error) {
			if v == "" {
				return nil, boom
			}
			return []byte(strings.ToUpper(v)), nil
		},
		func(_ string, b []byte) (string, error) { return strings.ToLower(string(b)), nil })
	b, err := s.Serialize(topic, "abc")
	if err != nil || string(b) != "ABC" {
		t.Fatalf("Serialize = %s, %v", b, err)
	}
	v, err := s.Deserialize(topic, b)
	if err != nil || v != "abc" {
		t.Fatalf("Deserialize = %s, %v", v, err)
	}
	_, err = s.Serialize(topic, "")
	var se *serde.Error
	if !errors.Is(err, boom) || !errors.As(err, &se) || se.Serde != "Upper" || se.Topic != topic || se.Op != "serialize" {
		t.Fatalf("Serialize error = %v; want boom wrapped in a *serde.Error of Upper", err)
	}
	if serde.Name(s) != "Upper" {
		t.Errorf("Name = %q", serde.Name(s))
	}
}

type orderedInts struct{ serde.Serde[int64] }

func (orderedInts) PreservesOrder() bool { return true }

func TestOrderPreserving(t *testing.T) {
	type event struct{}
	for name, c := range map[string]struct{ got, want bool }{
		"String":            {serde.OrderPreserving(serde.String()), true},
		"Bytes":             {serde.OrderPreserving(serde.Bytes()), true},
		"Int64":             {serde.OrderPreserving(serde.Int64()), false},
		"Int32":             {serde.OrderPreserving(serde.Int32()), false},
		"Float64":           {serde.OrderPreserving(serde.Float64()), false},
		"JSON":              {serde.OrderPreserving(serde.JSON[event]()), false},
		"Nullable[String]":  {serde.OrderPreserving(serde.Nullable(serde.String())), true},
		"Nullable[Int64]":   {serde.OrderPreserving(serde.Nullable(serde.Int64())), false},
		"Funcs":             {serde.OrderPreserving(serde.Funcs[int]("f", nil, nil)), false},
		"says it preserves": {serde.OrderPreserving[int64](orderedInts{serde.Int64()}), true},
	} {
		if c.got != c.want {
			t.Errorf("OrderPreserving(%s) = %v, want %v", name, c.got, c.want)
		}
	}
}

// The Int64 documentation promises byte order = value order among values of one sign,
// and OrderPreserving says false because it fails across signs. Check both claims.
func TestInt64ByteOrderWithinOneSign(t *testing.T) {
	s := serde.Int64()
	vals := []int64{math.MinInt64, -1 << 40, -256, -2, -1, 0, 1, 2, 255, 256, 1 << 40, math.MaxInt64}
	for i := range vals {
		for j := range vals {
			a, _ := s.Serialize(topic, vals[i])
			b, _ := s.Serialize(topic, vals[j])
			sameSign := (vals[i] < 0) == (vals[j] < 0)
			byteLess, valueLess := bytes.Compare(a, b) < 0, vals[i] < vals[j]
			if sameSign && byteLess != valueLess {
				t.Errorf("%d, %d: byte order differs from value order within one sign", vals[i], vals[j])
			}
			if !sameSign && byteLess == valueLess {
				t.Errorf("%d, %d: byte order matches value order across signs; then OrderPreserving could say true", vals[i], vals[j])
			}
		}
	}
}

func FuzzInt64RoundTrip(f *testing.F) {
	for _, v := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		b, err := serde.Int64().Serialize(topic, v)
		if err != nil || len(b) != 8 {
			t.Fatalf("Serialize(%d) = % x, %v", v, b, err)
		}
		back, err := serde.Int64().Deserialize(topic, b)
		if err != nil || back != v {
			t.Fatalf("round trip of %d gave %d, %v", v, back, err)
		}
		i32 := int32(v)
		b, _ = serde.Int32().Serialize(topic, i32)
		back32, err := serde.Int32().Deserialize(topic, b)
		if err != nil || back32 != i32 {
			t.Fatalf("Int32 round trip of %d gave %d, %v", i32, back32, err)
		}
	})
}

func FuzzFloat64RoundTrip(f *testing.F) {
	for _, v := range []float64{0, 1, -2.5, math.Inf(1), math.MaxFloat64, math.NaN()} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		b, err := serde.Float64().Serialize(topic, v)
		if err != nil || len(b) != 8 {
			t.Fatalf("Serialize(%v) = % x, %v", v, b, err)
		}
		back, err := serde.Float64().Deserialize(topic, b)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(v) {
			if !math.IsNaN(back) {
				t.Fatalf("NaN came back as %v", back)
			}
			return
		}
		if math.Float64bits(back) != math.Float64bits(v) {
			t.Fatalf("round trip of %v (%x) gave %v (%x)", v, math.Float64bits(v), back, math.Float64bits(back))
		}
	})
}

func FuzzStringRoundTrip(f *testing.F) {
	for _, v := range []string{"", "a", "Straße", "ÉCOLE", "日本語", "\x00\xff"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		b, err := serde.String().Serialize(topic, v)
		if err != nil || b == nil || string(b) != v {
			t.Fatalf("Serialize(%q) = %#v, %v", v, b, err)
		}
		back, err := serde.String().Deserialize(topic, b)
		if err != nil || back != v {
			t.Fatalf("round trip of %q gave %q, %v", v, back, err)
		}
		type doc struct {
			S string
			N *int64
		}
		js := serde.JSON[doc]()
		b, err = js.Serialize(topic, doc{S: v})
		if err != nil {
			t.Fatal(err)
		}
		d, err := js.Deserialize(topic, b)
		// encoding/json replaces invalid UTF-8, so only valid strings come back as they were.
		if err != nil || (utf8.ValidString(v) && d.S != v) || d.N != nil {
			t.Fatalf("JSON round trip of %q gave %+v, %v", v, d, err)
		}
	})
}
