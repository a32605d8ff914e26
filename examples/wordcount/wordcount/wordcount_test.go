package wordcount_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// tokenize is the test's own reading of the word rule, written independently of
// wordcount.Words: a two-state machine over runes. A word is a maximal run of letters
// (Unicode category L) and decimal digits (Nd); every other rune ends it; words are
// lower-cased rune by rune.
func tokenize(line string) []string {
	var words []string
	var cur []rune
	inWord := false
	for _, r := range line {
		wordRune := unicode.In(r, unicode.L, unicode.Nd)
		switch {
		case wordRune && !inWord:
			inWord, cur = true, []rune{unicode.ToLower(r)}
		case wordRune && inWord:
			cur = append(cur, unicode.ToLower(r))
		case !wordRune && inWord:
			inWord = false
			words = append(words, string(cur))
		}
	}
	if inWord {
		words = append(words, string(cur))
	}
	return words
}

// corpus makes n lines of varied text from a fixed seed: words of many scripts and
// cases, digits, punctuation, tabs, blank lines, CRLF endings, and runes that are not
// word characters (emoji, symbols, combining marks, no-break spaces).
func corpus(n int) []string {
	words := []string{
		"the", "The", "THE", "kafka", "Kafka", "KAFKA", "stream", "Streams", "streams",
		"Straße", "STRASSE", "straße", "ÉCOLE", "école", "École", "naïve", "Naïve", "façade",
		"Ångström", "smörgåsbord", "İstanbul", "ĳssel",
		"Αθήνα", "ΑΘΗΝΑ", "αθηνα", "λόγος", "ΛΌΓΟΣ", "Σίσυφος",
		"Москва", "МОСКВА", "москва", "Привет", "ёлка", "ЁЛКА",
		"東京", "東京タワー", "日本語", "中文", "한국어", "ひらがな",
		"2026", "v2", "x86", "3", "007", "٣٤", "١٠",
		"rock'n'roll", "e-mail", "state_store", "a.b.c", "foo/bar", "50%", "#tag", "@user",
		"don't", "C++", "C#", "F#", "node.js",
	}
	seps := []string{" ", " ", " ", "  ", "\t", ", ", ". ", "! ", "? ", "; ", ": ", " - ", " — ", " (", ") ",
		" \"", "\" ", " «", "» ", "…", " 😀 ", "™", "\u00a0", "\u3000", "、", "。", " ¿", "¡", " ² ", " Ⅻ "}
	rng := rand.New(rand.NewPCG(2026, 2))
	lines := make([]string, 0, n)
	for len(lines) < n {
		switch rng.IntN(12) {
		case 0:
			lines = append(lines, "") // blank line
			continue
		case 1:
			lines = append(lines, "  \t ... !!! —— 😀\t") // no words at all
			continue
		case 2:
			// A decomposed é: e followed by a combining acute accent (a mark, not a
			// letter), so the word ends at the mark.
			lines = append(lines, "Cafe\u0301 cafe\u0301s CAFÉ café")
			continue
		}
		var sb strings.Builder
		for i := range 1 + rng.IntN(14) {
			if i > 0 {
				sb.WriteString(seps[rng.IntN(len(seps))])
			}
			sb.WriteString(words[rng.IntN(len(words))])
		}
		if rng.IntN(5) == 0 {
			sb.WriteString("\r")
		}
		if rng.IntN(4) == 0 {
			sb.WriteString(seps[rng.IntN(len(seps))])
		}
		lines = append(lines, sb.String())
	}
	return lines
}

// The tokenizer itself is checked against hand-counted lines, so that the comparison
// below does not rest on two implementations sharing one mistake.
func TestTokenizerByHand(t *testing.T) {
	for line, want := range map[string][]string{
		"":                       nil,
		"Hello, hello World!":    {"hello", "hello", "world"},
		"Straße STRASSE\tstraße": {"straße", "strasse", "straße"},
		"ÉCOLE école":            {"école", "école"},
		"Αθήνα ΑΘΗΝΑ; Москва—МОСКВА":   {"αθήνα", "αθηνα", "москва", "москва"},
		"東京タワー、日本語。":                   {"東京タワー", "日本語"},
		"rock'n'roll e-mail 3.14 v2":   {"rock", "n", "roll", "e", "mail", "3", "14", "v2"},
		"state_store 50% #tag 😀emoji😀": {"state", "store", "50", "tag", "emoji"},
		"x² Ⅻ ٣٤":                      {"x", "٣٤"},
		"cafe\u0301s":                  {"cafe", "s"},
		"no\u00a0break\r\n":            {"no", "break"},
	} {
		if got := tokenize(line); !slices.Equal(got, want) {
			t.Errorf("tokenize(%q) = %q, want %q", line, got, want)
		}
	}
}

// version is one way of writing the word count: its topology, and how its store and
// changelog keep a count.
type version struct {
	name      string
	topology  func() (*topology.Topology, error)
	stored    func(d *topologytest.Driver) (map[string]int64, error)
	logged    func(value []byte) (int64, bool)
	changelog string // the layout of a changelog value, for messages
}

var versions = []version{
	{
		name: "processor API", topology: wordcount.Topology,
		stored: func(d *topologytest.Driver) (map[string]int64, error) {
			st, err := topologytest.KeyValueStore[string, int64](d, wordcount.StoreName)
			if err != nil {
				return nil, err
			}
			kvs, err := statestore.Collect(st.All())
			out := map[string]int64{}
			for _, kv := range kvs {
				out[kv.Key] = kv.Value
			}
			return out, err
		},
		logged: func(v []byte) (int64, bool) {
			return int64(binary.BigEndian.Uint64(v)), len(v) == 8
		},
		changelog: "an Int64",
	},
	{
		// the DSL keeps each count with the timestamp of its last update
		name: "DSL", topology: dsl.Topology,
		stored: func(d *topologytest.Driver) (map[string]int64, error) {
			st, err := topologytest.KeyValueStore[string, stream.Timestamped[int64]](d, dsl.StoreName)
			if err != nil {
				return nil, err
			}
			kvs, err := statestore.Collect(st.All())
			out := map[string]int64{}
			for _, kv := range kvs {
				out[kv.Key] = kv.Value.Value
			}
			return out, err
		},
		logged: func(v []byte) (int64, bool) {
			if len(v) != 16 {
				return 0, false
			}
			return int64(binary.BigEndian.Uint64(v[8:])), true
		},
		changelog: "a timestamp and an Int64",
	},
}

func TestWordcountEqualsIndependentCount(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) { testIndependentCount(t, v) })
	}
}

func testIndependentCount(t *testing.T, v version) {
	lines := corpus(400)
	want := map[string]int64{}
	total := 0
	for _, l := range lines {
		for _, w := range tokenize(l) {
			want[w]++
			total++
		}
	}
	if len(want) < 50 || total < 1500 {
		t.Fatalf("the corpus is too poor: %d distinct words, %d in all", len(want), total)
	}

	topo, err := v.topology()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "wordcount-test", AutoAdvance: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	for i, l := range lines {
		// Like the console producer, most lines have no key; some have one, which the
		// count ignores.
		if i%7 == 0 {
			err = in.Pipe(fmt.Sprint("line-", i), l)
		} else {
			err = in.PipeValues(l)
		}
		if err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
	}

	out := topologytest.NewOutputTopic(d, wordcount.OutputTopic, serde.String(), serde.Int64())
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != total {
		t.Errorf("output has %d records, want one per word: %d", len(recs), total)
	}
	// Each word's counts go 1, 2, 3, ... in output order.
	running := map[string]int64{}
	for i, r := range recs {
		running[r.Key]++
		if r.Value != running[r.Key] {
			t.Fatalf("output record %d: %q=%d, want %d", i, r.Key, r.Value, running[r.Key])
		}
	}
	compare(t, "output (last value per word)", running, want)

	// The store holds the same counts...
	stored, err := v.stored(d)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "store", stored, want)

	// ...and so does its changelog, read as a compacted topic.
	logged := map[string]int64{}
	for _, r := range d.Records(d.ChangelogTopic(wordcount.StoreName)) {
		n, ok := v.logged(r.Value)
		if !ok {
			t.Fatalf("changelog value %x is not %s", r.Value, v.changelog)
		}
		logged[string(r.Key)] = n
	}
	compare(t, "changelog", logged, want)

	// Words went through the repartition topic, keyed by word.
	rep := d.Records("wordcount-test-words-repartition")
	if len(rep) != total {
		t.Errorf("repartition topic has %d records, want %d", len(rep), total)
	}
	for _, r := range rep {
		if string(r.Key) != string(r.Value) {
			t.Fatalf("repartition record keyed %q carries %q", r.Key, r.Value)
		}
	}
}

func compare(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	n := 0
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: %q = %d, independent count %d", what, k, got[k], want[k])
			if n++; n == 20 {
				t.Fatalf("%s: too many differences", what)
			}
		}
	}
}

// The unit test shown in README.md, verbatim, so the README stays true.
func TestReadmeExample(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, wordcount.OutputTopic, serde.String(), serde.Int64())

	if err := in.PipeValues("Hello, Straße!", "hello STRASSE straße"); err != nil {
		t.Fatal(err)
	}
	counts, err := out.ReadKeyValueMap()
	if err != nil {
		t.Fatal(err)
	}
	if counts["hello"] != 2 || counts["straße"] != 2 || counts["strasse"] != 1 {
		t.Fatalf("counts %v", counts)
	}
}

// BenchmarkTopologyTest runs both versions in the test driver: the cost of the DSL's
// layers over the processor API (timestamped values, Change records).
func BenchmarkTopologyTest(b *testing.B) {
	lines := corpus(200)
	for _, v := range versions {
		b.Run(v.name, func(b *testing.B) {
			topo, err := v.topology()
			if err != nil {
				b.Fatal(err)
			}
			d, err := topologytest.New(topo, topologytest.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
			b.ResetTimer()
			for i := range b.N {
				if err := in.PipeValues(lines[i%len(lines)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
