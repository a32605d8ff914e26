package topology_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

type point struct {
	X, Y int
}

// keyStores builds a topology with one store per kind of key a query may name.
func keyStores(tb testing.TB) *topology.Topology {
	tb.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "src", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "p", processor.Filter(func(processor.Record[string, string]) bool { return true }), "src")
	topology.AddKeyValueStore(b, "string", serde.String(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "bytes", serde.Bytes(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "int64", serde.Int64(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "int32", serde.Int32(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "float64", serde.Float64(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "json", serde.JSON[point](), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "nullable", serde.Nullable(serde.JSON[point]()), serde.Int64(), "p")
	topo, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return topo
}

// FuzzKeyFromText: the key of an interactive query arrives as a URL path segment, any
// text. Each store parses it the way its key type reads text (as it is for strings and
// bytes, base-10 numbers, JSON otherwise): it gives exactly the serialized bytes of the
// value strconv or encoding/json reads from the text, or an error; never nil bytes (a
// null key is no key a store holds).
func FuzzKeyFromText(f *testing.F) {
	for _, s := range []string{"", "word", "42", "-9223372036854775808", "9223372036854775808", "1e3", "0x10",
		"NaN", "-0", "Inf", "2147483648", `{"X":1,"Y":2}`, "null", `{"X":"1"}`, " 7", "+7", "\xff"} {
		f.Add(s)
	}
	stores := graph.Of(keyStores(f)).Stores
	f.Fuzz(func(t *testing.T, text string) {
		const topic = "app-store-changelog"
		got := map[string][]byte{}
		for name, st := range stores {
			b, err := st.KeyFromText(text, topic)
			if err == nil && b == nil {
				t.Fatalf("store %s: key %q gives nil bytes", name, text)
			}
			if err != nil {
				b = nil
			}
			got[name] = b
		}
		expect := func(store string, want []byte, ok bool) {
			t.Helper()
			if !ok {
				want = nil
			}
			if !bytes.Equal(got[store], want) || (got[store] == nil) != (want == nil) {
				t.Fatalf("store %s: key %q gives % x; want % x", store, text, got[store], want)
			}
		}
		expect("string", []byte(text), true)
		expect("bytes", []byte(text), true)
		i64, err := strconv.ParseInt(text, 10, 64)
		b, _ := serde.Int64().Serialize(topic, i64)
		expect("int64", b, err == nil)
		i32, err := strconv.ParseInt(text, 10, 32)
		b, _ = serde.Int32().Serialize(topic, int32(i32))
		expect("int32", b, err == nil)
		f64, err := strconv.ParseFloat(text, 64)
		b, _ = serde.Float64().Serialize(topic, f64)
		expect("float64", b, err == nil)
		if err == nil && math.IsNaN(f64) && !bytes.Equal(b, []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0}) {
			t.Fatalf("NaN key %q is not the canonical NaN: % x", text, b)
		}
		var p point
		err = json.Unmarshal([]byte(text), &p)
		b, _ = serde.JSON[point]().Serialize(topic, p)
		expect("json", b, err == nil)
		var pp *point
		err = json.Unmarshal([]byte(text), &pp)
		b, _ = serde.Nullable(serde.JSON[point]()).Serialize(topic, pp)
		expect("nullable", b, err == nil && pp != nil)
	})
}
