package stream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// tumblingOnClose counts per key in tumbling 10 s windows with 2 s of grace, emitted
// when they close.
// after, when not nil, is called with each input key after the aggregation has
// processed it (to fail a transaction after an emission).
func tumblingOnClose(boom, after func(string)) *stream.Builder {
	b := stream.NewBuilder()
	in := stream.From(b, serde.String(), serde.String(), []string{"in"})
	counts := in.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Emit(stream.OnWindowClose).Count()
	windowedOut(counts, boom)
	if after != nil {
		in.ForEach(func(k, _ string) { after(k) })
	}
	return b
}

// Emit on window close: no updates, each window once when the aggregation's stream time
// reaches its end plus grace, in the order of window start then key bytes, with the
// timestamp of its last update; a jump in stream time emits every window it closes.
func TestEmitOnWindowCloseTumbling(t *testing.T) {
	h := run(t, tumblingOnClose(nil, nil))
	h.pipe("in", "b", "x", 1_000)
	h.pipe("in", "a", "x", 3_000)
	h.pipe("in", "a", "x", 11_000)
	h.pipe("in", "b", "x", 8_000)
	h.want("out", false, "")
	h.pipe("in", "c", "x", 12_000) // [0,10) closes at 12 s
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000")
	h.pipe("in", "b", "x", 9_000)  // late
	h.pipe("in", "c", "x", 21_999) // [10,20) closes at 22 s: not yet
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000")
	h.pipe("in", "c", "x", 35_000) // closes [10,20) and [20,30)
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000 a=[10,20]=1@11000 c=[10,20]=1@12000 c=[20,30]=1@21999")
	// A restart restores the last emit's close time: nothing is emitted again.
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("in", "d", "x", 36_000)
	h.pipe("in", "d", "x", 52_000)
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000 a=[10,20]=1@11000 c=[10,20]=1@12000 c=[20,30]=1@21999 c=[30,40]=1@35000 d=[30,40]=1@36000")
}

// An aborted transaction takes the last emit's close time back: the windows whose
// emission failed (downstream of the aggregation, or after it in the same transaction)
// come out when the record is processed again.
func TestEmitOnWindowCloseRollsBack(t *testing.T) {
	for _, where := range []string{"downstream", "after"} {
		t.Run(where, func(t *testing.T) {
			failed := false
			boom := func(k string) {
				if k == "boom" && !failed {
					failed = true
					panic("boom")
				}
			}
			var h *harness
			if where == "downstream" {
				h = run(t, tumblingOnClose(boom, nil))
			} else {
				h = run(t, tumblingOnClose(nil, boom))
			}
			h.pipe("in", "a", "x", 1_000)
			h.pipe("in", "b", "x", 2_000)
			key := "x"
			if where == "after" {
				key = "boom"
			} else {
				h.pipe("in", "boom", "x", 2_000)
			}
			if err := h.d.PipeRaw("in", []byte(key), []byte("x"), nil, at(12_000)); err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("the failing record: %v", err)
			}
			h.want("out", false, "")
			h.pipe("in", key, "x", 12_000)
			if where == "after" {
				h.want("out", false, "a=[0,10]=1@1000 b=[0,10]=1@2000")
			} else {
				h.want("out", false, "a=[0,10]=1@1000 b=[0,10]=1@2000 boom=[0,10]=1@2000")
			}
		})
	}
}

// Sessions on close: each session once, when its end plus gap plus grace is reached,
// by end, then key; merged sessions never come out.
func TestEmitOnWindowCloseSessions(t *testing.T) {
	b := stream.NewBuilder()
	counts := stream.From(b, serde.String(), serde.String(), []string{"in"}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBySession(window.Sessions(5*time.Second, time.Second)).Emit(stream.OnWindowClose).Count()
	windowedOut(counts, nil)
	h := run(t, b)
	h.pipe("in", "b", "x", 1_000)
	h.pipe("in", "a", "x", 2_000)
	h.pipe("in", "a", "x", 4_000)
	h.pipe("in", "d", "x", 7_000) // close time 7 - 6 = 1 s: b's [1,1] ends at it, not before
	h.want("out", false, "")
	h.pipe("in", "c", "x", 9_000) // close time 9 - 6 = 3 s: sessions ending before it have closed
	h.want("out", false, "b=[1,1]=1@1000")
	h.pipe("in", "a", "x", 5_000) // on time: it merges [2,4] into [2,5], which has not closed
	h.pipe("in", "c", "x", 10_500)
	h.want("out", false, "b=[1,1]=1@1000")
	h.pipe("in", "c", "x", 11_500)
	h.want("out", false, "b=[1,1]=1@1000 a=[2,5]=3@5000")
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("in", "c", "x", 30_000)
	h.want("out", false, "b=[1,1]=1@1000 a=[2,5]=3@5000 d=[7,7]=1@7000 c=[9,11]=3@11500")
}

// Sliding windows on close: the windows that end before the close time.
func TestEmitOnWindowCloseSliding(t *testing.T) {
	b := stream.NewBuilder()
	counts := stream.From(b, serde.String(), serde.String(), []string{"in"}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBySliding(window.Sliding(10*time.Second, 0)).Emit(stream.OnWindowClose).Count()
	windowedOut(counts, nil)
	h := run(t, b)
	h.pipe("in", "a", "x", 20_000)
	h.pipe("in", "a", "x", 25_000)
	h.want("out", false, "a=[10,20]=1@20000") // ends before 25 s
	h.pipe("in", "b", "x", 40_000)
	h.want("out", false, "a=[10,20]=1@20000 a=[15,25]=2@25000 a=[20,30]=1@25000")
}

// A jump in stream time far past the store's retention still emits every window it
// closes: the aggregation emits before it stores the record that jumps, which would
// expire them (Kafka Streams emits after, and loses them so).
func TestEmitOnWindowCloseSurvivesAJump(t *testing.T) {
	const day = 24 * 60 * 60 * 1000
	for _, c := range []struct {
		name         string
		build        func(*stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64]
		before, want string
	}{
		{"tumbling", func(g *stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64] {
			return g.WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Emit(stream.OnWindowClose).Count()
		}, "", "a=[0,10]=2@3000 b=[10,20]=1@11000"},
		{"sessions", func(g *stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64] {
			return g.WindowedBySession(window.Sessions(5*time.Second, time.Second)).Emit(stream.OnWindowClose).Count()
		}, "a=[1,3]=2@3000", "a=[1,3]=2@3000 b=[11,11]=1@11000"},
		{"sliding", func(g *stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64] {
			return g.WindowedBySliding(window.Sliding(10*time.Second, 0)).Emit(stream.OnWindowClose).Count()
		}, "", "a=[10,20]=1@20000 b=[10,20]=1@20000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := stream.NewBuilder()
			g := stream.From(b, serde.String(), serde.String(), []string{"in"}).GroupByKey(serde.String(), serde.String())
			windowedOut(c.build(g), nil)
			h := run(t, b)
			if c.name == "sliding" {
				h.pipe("in", "a", "x", 20_000)
				h.pipe("in", "b", "x", 20_000)
			} else {
				h.pipe("in", "a", "x", 1_000)
				h.pipe("in", "a", "x", 3_000)
				h.pipe("in", "b", "x", 11_000)
			}
			h.want("out", false, c.before)
			h.pipe("in", "c", "x", day) // the next day
			h.want("out", false, c.want)
		})
	}
}

// A restart does not lower a windowed operator's stream time below its store's: a record
// late before the restart is still dropped after it, where Kafka Streams (stream time in
// memory only) would take it into a window its store has expired and start the window
// over, forwarding a count that forgets the window's earlier records.
func TestWindowedStreamTimeSurvivesARestart(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(*stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64]
		late  int64
	}{
		{"tumbling", func(g *stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64] {
			return g.WindowedBy(window.Tumbling(10*time.Second, 0)).Count()
		}, 5_000},
		{"sessions", func(g *stream.GroupedStream[string, string]) stream.Table[window.Windowed[string], int64] {
			return g.WindowedBySession(window.Sessions(5*time.Second, 0)).Count()
		}, 3_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := stream.NewBuilder(stream.NoCaching())
			g := stream.From(b, serde.String(), serde.String(), []string{"in"}).GroupByKey(serde.String(), serde.String())
			windowedOut(c.build(g), nil)
			h := run(t, b)
			h.pipe("in", "a", "x", 1_000)
			h.pipe("in", "a", "x", 2_000)
			h.pipe("in", "b", "x", 30_000) // a's first window or session has closed
			before := h.out("out", false)
			h.pipe("in", "a", "x", c.late) // late: dropped
			if got := h.out("out", false); got != before {
				t.Fatalf("before the restart, the late record was taken: %s", strings.TrimPrefix(got, before))
			}
			if err := h.d.Restart(); err != nil {
				t.Fatal(err)
			}
			h.pipe("in", "a", "x", c.late) // as late as before
			if got := h.out("out", false); got != before {
				t.Fatalf("after the restart, the late record was taken: %s", strings.TrimPrefix(got, before))
			}
		})
	}
}
