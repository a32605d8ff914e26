package serde_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/eddy-streams/eddy/serde"
)

// The fuzz targets of this file feed the built-in deserializers bytes as they arrive
// from a topic: anything at all. Each checks the serde's contract, not only that it
// does not panic: bytes it accepts serialize back to themselves (or, for JSON, to a
// value that decodes the same), nil is a tombstone (ErrTombstone unless the type has a
// nil), and every error is a *serde.Error naming the serde, the operation and the topic.
// Seeds: testdata/fuzz/<target>/; integration/fuzz.sh runs each target briefly.

// checkDeError checks that err is a *serde.Error for a deserialization on topic by the
// serde named name.
func checkDeError(t *testing.T, err error, name string) {
	t.Helper()
	var se *serde.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T) is not a *serde.Error", name, err, err)
	}
	if se.Serde != name || se.Op != "deserialize" || se.Topic != topic {
		t.Fatalf("%s: error names serde %q, op %q, topic %q", name, se.Serde, se.Op, se.Topic)
	}
}

// FuzzStringBytes: String and Bytes take any bytes and give them back unchanged; String
// rejects only nil.
func FuzzStringBytes(f *testing.F) {
	for _, s := range []string{"", "word", "\xff\xfe invalid UTF-8", "日本語", "\x00"} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(nil), true)
	f.Fuzz(func(t *testing.T, data []byte, null bool) {
		if null {
			data = nil
		}
		s, err := serde.String().Deserialize(topic, data)
		if data == nil {
			if !errors.Is(err, serde.ErrTombstone) {
				t.Fatalf("String: Deserialize(nil) = %q, %v; want ErrTombstone", s, err)
			}
			checkDeError(t, err, "String")
		} else {
			if err != nil {
				t.Fatalf("String: Deserialize(% x): %v", data, err)
			}
			back, err := serde.String().Serialize(topic, s)
			if err != nil || !bytes.Equal(back, data) || back == nil {
				t.Fatalf("String: % x -> %q -> % x, %v", data, s, back, err)
			}
		}
		b, err := serde.Bytes().Deserialize(topic, data)
		if err != nil || !bytes.Equal(b, data) || (b == nil) != (data == nil) {
			t.Fatalf("Bytes: Deserialize(% x) = % x, %v", data, b, err)
		}
		back, err := serde.Bytes().Serialize(topic, b)
		if err != nil || !bytes.Equal(back, data) || (back == nil) != (data == nil) {
			t.Fatalf("Bytes: Serialize(% x) = % x, %v", b, back, err)
		}
	})
}

// FuzzNumbers: Int32, Int64 and Float64 accept exactly their width, and give the same
// bytes back (Float64: every NaN as Java's canonical NaN); other lengths and nil are
// errors that say so.
func FuzzNumbers(f *testing.F) {
	for _, s := range [][]byte{
		nil, {}, {0, 0, 0, 1}, {0x80, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 0, 0, 0, 0, 42}, {0x7f, 0xf8, 0, 0, 0, 0, 0, 0}, {0x7f, 0xf0, 0, 0, 0, 0, 0, 1},
		{0xff, 0xf8, 0, 0, 0, 0, 0, 1}, {0x80, 0, 0, 0, 0, 0, 0, 0}, {1, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		f.Add(s, s == nil)
	}
	f.Fuzz(func(t *testing.T, data []byte, null bool) {
		if null {
			data = nil
		}
		checkFixed(t, serde.Int32(), "Int32", 4, data, func(back []byte) []byte { return data })
		checkFixed(t, serde.Int64(), "Int64", 8, data, func(back []byte) []byte { return data })
		checkFixed(t, serde.Float64(), "Float64", 8, data, func(back []byte) []byte {
			if math.IsNaN(math.Float64frombits(binary.BigEndian.Uint64(data))) {
				return []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0}
			}
			return data
		})
	})
}

func checkFixed[T any](t *testing.T, s serde.Serde[T], name string, width int, data []byte, want func(back []byte) []byte) {
	t.Helper()
	v, err := s.Deserialize(topic, data)
	switch {
	case data == nil:
		if !errors.Is(err, serde.ErrTombstone) {
			t.Fatalf("%s: Deserialize(nil) = %v, %v; want ErrTombstone", name, v, err)
		}
		checkDeError(t, err, name)
		return
	case len(data) != width:
		if err == nil {
			t.Fatalf("%s: Deserialize(% x) accepted %d bytes as %v", name, data, len(data), v)
		}
		checkDeError(t, err, name)
		return
	case err != nil:
		t.Fatalf("%s: Deserialize(% x): %v", name, data, err)
	}
	back, err := s.Serialize(topic, v)
	if err != nil {
		t.Fatalf("%s: Serialize(%v): %v", name, v, err)
	}
	if w := want(back); !bytes.Equal(back, w) {
		t.Fatalf("%s: % x -> %v -> % x, want % x", name, data, v, back, w)
	}
}

// event is a JSON value type with the usual field kinds.
type event struct {
	ID    int64             `json:"id"`
	Name  string            `json:"name"`
	Score float64           `json:"score"`
	Tags  []string          `json:"tags,omitempty"`
	Attrs map[string]string `json:"attrs,omitempty"`
	Next  *event            `json:"next,omitempty"`
}

// FuzzJSON: JSON[T] either rejects the bytes with a *serde.Error or gives a value whose
// serialization is a fixed point (encode(decode(encode(decode(b)))) == encode(decode(b)));
// nil is a tombstone for a struct and nil for a map; Nullable adds nil to a struct.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"name":"a","score":0.5,"tags":["x"],"attrs":{"k":"v"},"next":{"id":2}}`,
		`{}`, `null`, `[]`, `"text"`, `{"id":"1"}`, `{"id":1e400}`, `{"name":"\ud800"}`,
		`{"next":{"next":{"next":{}}}}`, `{"attrs":{"":""}}`, "{\"name\":\"\xff\"}", ``,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(nil), true)
	f.Fuzz(func(t *testing.T, data []byte, null bool) {
		if null {
			data = nil
		}
		checkJSON(t, serde.JSON[event](), data, false)
		checkJSON(t, serde.JSON[map[string]any](), data, true)
		checkJSON(t, serde.JSON[[]int64](), data, true)

		// Nullable[JSON[event]]: nil <-> nil pointer; otherwise as JSON[event].
		n := serde.Nullable(serde.JSON[event]())
		p, err := n.Deserialize(topic, data)
		if data == nil {
			if p != nil || err != nil {
				t.Fatalf("Nullable: Deserialize(nil) = %v, %v", p, err)
			}
			if b, err := n.Serialize(topic, nil); b != nil || err != nil {
				t.Fatalf("Nullable: Serialize(nil) = % x, %v", b, err)
			}
			return
		}
		v, verr := serde.JSON[event]().Deserialize(topic, data)
		if (err == nil) != (verr == nil) || (err == nil && !reflect.DeepEqual(*p, v)) {
			t.Fatalf("Nullable[JSON] and JSON disagree on %q: %v, %v / %v, %v", data, p, err, v, verr)
		}
	})
}

func checkJSON[T any](t *testing.T, s serde.Serde[T], data []byte, nilable bool) {
	t.Helper()
	name := serde.Name(s)
	v, err := s.Deserialize(topic, data)
	if data == nil {
		if nilable {
			if err != nil || !reflect.ValueOf(&v).Elem().IsNil() {
				t.Fatalf("%s: Deserialize(nil) = %v, %v; want nil", name, v, err)
			}
			return
		}
		if !errors.Is(err, serde.ErrTombstone) {
			t.Fatalf("%s: Deserialize(nil) = %v, %v; want ErrTombstone", name, v, err)
		}
		checkDeError(t, err, name)
		return
	}
	if err != nil {
		checkDeError(t, err, name)
		return
	}
	b, err := s.Serialize(topic, v)
	if err != nil {
		t.Fatalf("%s: Serialize(%#v) of a value it decoded from %q: %v", name, v, data, err)
	}
	again, err := s.Deserialize(topic, b)
	if b == nil {
		// A nil value (JSON null for a map or slice) serializes to a tombstone.
		if !nilable || !reflect.ValueOf(&v).Elem().IsNil() {
			t.Fatalf("%s: Serialize(%#v) = nil", name, v)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %q -> %#v -> %q, which does not decode: %v", name, data, v, b, err)
	}
	// encoding/json is not a bijection (omitempty drops an empty map, a number may be
	// spelled many ways), but its output is a fixed point: it decodes to a value that
	// encodes to the same bytes.
	b2, err := s.Serialize(topic, again)
	if err != nil || !bytes.Equal(b2, b) {
		t.Fatalf("%s: %q -> %#v -> %q -> %#v -> %q, %v", name, data, v, b, again, b2, err)
	}
}
