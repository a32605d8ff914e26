package stream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// Every misuse of the DSL is a Build error naming it, never a panic (issue 26: a branch
// looked up without its prefix was the zero Stream, and To on it a nil-pointer panic).
// Kills the mutants "Get returns the zero Stream for an unknown name" (a panic), "no
// lookup without the prefix", "a branch after the end ignored", "a Merge across
// Builders unchecked" and "a nil serde accepted".
func TestDSLMisuseIsABuildError(t *testing.T) {
	always := func(string, string) bool { return true }
	cases := []struct {
		name  string
		build func(b *stream.Builder)
		want  []string
	}{
		{"a mistyped branch name", func(b *stream.Builder) {
			br := stream.From(b, str, str, []string{"in"}).Split(stream.Named("split-")).Branch("a", always).DefaultBranch("rest")
			br.Get("split-b").Filter(always).To("out", str, str)
		}, []string{`no branch "split-b"`, `"split-a"`, `"split-rest"`, `prefix "split-"`}},
		{"a branch added after the split ended", func(b *stream.Builder) {
			sp := stream.From(b, str, str, []string{"in"}).Split(stream.Named("s-"))
			sp.Branch("a", always).NoDefaultBranch().Get("a").To("out", str, str)
			sp.Branch("late", always)
		}, []string{`branch "s-late" added after the split ended`}},
		{"a nil branch predicate", func(b *stream.Builder) {
			stream.From(b, str, str, []string{"in"}).Split(stream.Named("s-")).Branch("a", nil).NoDefaultBranch().Get("a").To("out", str, str)
		}, []string{`branch "s-a" has a nil predicate`}},
		{"a merge of another Builder's stream", func(b *stream.Builder) {
			other := stream.From(stream.NewBuilder(), str, str, []string{"other"})
			stream.From(b, str, str, []string{"in"}).Merge([]stream.Stream[string, string]{other}).To("out", str, str)
		}, []string{"Merge", "another Builder"}},
		{"a zero Table joined", func(b *stream.Builder) {
			var zero stream.Table[string, string]
			stream.Join(stream.From(b, str, str, []string{"in"}), zero, func(v, t string) string { return v }).To("out", str, str)
		}, []string{"join of stream", "zero Table", "never assigned"}},
		{"a zero Table in a table join", func(b *stream.Builder) {
			var zero stream.Table[string, string]
			stream.ToStream(stream.TableJoin(stream.TableFrom(b, str, str, "t"), zero, func(a, b string) string { return a }, str)).To("out", str, serde.Nullable(str))
		}, []string{"join of table", "zero Table"}},
		{"a zero Table in a foreign-key join", func(b *stream.Builder) {
			var zero stream.Table[string, string]
			stream.ToStream(stream.ForeignKeyJoin(stream.TableFrom(b, str, str, "t"), zero, func(v string) string { return v }, func(a, b string) string { return a }, str)).To("out", str, serde.Nullable(str))
		}, []string{"foreign-key join", "zero Table"}},
		{"a zero Stream in a stream-stream join", func(b *stream.Builder) {
			var zero stream.Stream[string, string]
			stream.StreamJoin(stream.From(b, str, str, []string{"in"}), zero, func(a, b string) string { return a }, window.JoinTimeDifference(time.Second, 0), stream.JoinedWith(str, str, str)).To("out", str, str)
		}, []string{"stream-stream join", "zero Stream"}},
		{"a zero GlobalTable joined", func(b *stream.Builder) {
			var zero stream.GlobalTable[string, string]
			stream.GlobalJoin(stream.From(b, str, str, []string{"in"}), zero, func(k, v string) (string, bool) { return k, true }, func(k, v, g string) string { return v }).To("out", str, str)
		}, []string{"zero GlobalTable"}},
		{"a zero Stream merged", func(b *stream.Builder) {
			var zero stream.Stream[string, string]
			stream.From(b, str, str, []string{"in"}).Merge([]stream.Stream[string, string]{zero}).To("out", str, str)
		}, []string{"Merge", "zero Stream"}},
		{"a nil sink serde", func(b *stream.Builder) {
			stream.From(b, str, str, []string{"in"}).To("out", nil, str)
		}, []string{"sink", "nil key serde"}},
		{"a nil source serde", func(b *stream.Builder) {
			stream.From[string, string](b, str, nil, []string{"in"}).To("out", str, str)
		}, []string{"source", "nil value serde"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := stream.NewBuilder()
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				c.build(b)
				_, err = b.Build()
			}()
			if err == nil || !errors.Is(err, topology.ErrInvalid) {
				t.Fatalf("Build: %v, want an invalid-topology error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
	// The name given to Branch, without the prefix, finds the branch too.
	b := stream.NewBuilder()
	br := stream.From(b, str, str, []string{"in"}).Split(stream.Named("split-")).Branch("a", always).NoDefaultBranch()
	if br.Get("a").Name() != "split-a" || br.Get("split-a").Name() != "split-a" {
		t.Errorf("Get(a) = %q, Get(split-a) = %q; want split-a for both", br.Get("a").Name(), br.Get("split-a").Name())
	}
	br.Get("a").To("out", str, str)
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
}

// An operation on a zero handle (a Stream or Table variable never assigned) has no
// Builder to report to: it panics, as a write to a nil map does, with a message that
// names the cause and the operation, where it was a bare nil-pointer dereference.
// Kills the mutant without Builder.newName's and Table.info's checks.
func TestOperationOnAZeroHandlePanicsSayingSo(t *testing.T) {
	ops := map[string]func(){
		"Stream.Filter": func() {
			var s stream.Stream[string, string]
			s.Filter(func(string, string) bool { return true })
		},
		"Stream.To": func() { var s stream.Stream[string, string]; s.To("out", str, str) },
		"Table.Filter": func() {
			var tb stream.Table[string, string]
			tb.Filter(func(string, string) bool { return true })
		},
		"ForeignKeyJoin": func() {
			var tb stream.Table[string, string]
			stream.ForeignKeyJoin(tb, tb, func(v string) string { return v }, func(a, b string) string { return a }, str)
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, "zero Stream or Table") || !strings.Contains(msg, "never assigned") {
					t.Errorf("recovered %v; want a panic naming the zero handle", r)
				}
			}()
			op()
		})
	}
}
