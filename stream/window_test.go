package stream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// An aborted transaction takes the windowed count's observed stream time back with it:
// the record at 100 s fails downstream of the count, its transaction is rolled back,
// and a record at 5 s is then on time (its window [0 s, 10 s) closes at 10 s + 2 s of
// grace), as it would be had the failed record never come. Without the rollback it
// would be dropped as late.
func TestWindowedStreamTimeRollsBackWithAbortedTransaction(t *testing.T) {
	b := stream.NewBuilder(stream.NoCaching())
	in := stream.From(b, serde.String(), serde.String(), []string{"in"})
	counts := in.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Count()
	out := stream.MapValues(stream.ToStream(counts), func(k window.Windowed[string], v *int64) *int64 {
		if k.Key == "boom" {
			panic("boom")
		}
		return v
	})
	out.To("out", window.TimeWindowedSerde(serde.String(), 10*time.Second), serde.Nullable(serde.Int64()))
	h := run(t, b)
	h.pipe("in", "a", "x", 1_000)
	if err := h.d.PipeRaw("in", []byte("boom"), []byte("x"), nil, at(100_000)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the failing record: %v", err)
	}
	h.pipe("in", "a", "y", 5_000)
	var got []string
	for _, r := range h.d.Records("out") {
		got = append(got, string(r.Key[:1]))
	}
	if len(got) != 2 {
		t.Fatalf("out has %d records (%q), want the two counts of a's window [0, 10 s): the record at 5 s was dropped as late", len(got), got)
	}
}

// A window takes records until its end plus the grace period has passed in the
// aggregation's stream time, which records of every key advance: a's window [0, 10 s)
// takes a record at 9 s at stream time 11 s, and drops one at 9.999 s at 12 s.
func TestWindowedCountGraceAndLate(t *testing.T) {
	b := stream.NewBuilder(stream.NoCaching())
	in := stream.From(b, serde.String(), serde.String(), []string{"in"})
	counts := in.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Count()
	stream.MapValues(stream.ToStream(counts), func(k window.Windowed[string], v *int64) string {
		return k.Key + "@" + k.Window.String()
	}).To("out", window.TimeWindowedSerde(serde.String(), 10*time.Second), serde.String())
	h := run(t, b)
	h.pipe("in", "a", "x", 1_000)
	h.pipe("in", "b", "x", 11_000) // stream time 11 s: [0, 10 s) closes at 12 s
	h.pipe("in", "a", "x", 9_000)  // on time
	h.pipe("in", "b", "x", 12_000) // stream time 12 s: [0, 10 s) closed
	h.pipe("in", "a", "x", 9_999)  // late: dropped
	var got []string
	for _, r := range h.d.Records("out") {
		got = append(got, string(r.Value))
	}
	want := "a@[1767225600000,1767225610000] b@[1767225610000,1767225620000] a@[1767225600000,1767225610000] b@[1767225610000,1767225620000]"
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}
