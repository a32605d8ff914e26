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
func tumblingOnClose(boom func(string)) *stream.Builder {
	b := stream.NewBuilder()
	counts := stream.From(b, serde.String(), serde.String(), []string{"in"}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Emit(stream.OnWindowClose).Count()
	windowedOut(counts, boom)
	return b
}

// Emit on window close: no updates, each window once when the aggregation's stream time
// reaches its end plus grace, in the order of window start then key bytes, with the
// timestamp of its last update; a jump in stream time emits every window it closes.
func TestEmitOnWindowCloseTumbling(t *testing.T) {
	h := run(t, tumblingOnClose(nil))
	h.pipe("in", "b", "x", 1_000)
	h.pipe("in", "a", "x", 3_000)
	h.pipe("in", "a", "x", 11_000)
	h.pipe("in", "b", "x", 8_000)
	h.want("out", false, "")
	h.pipe("in", "c", "x", 12_000) // [0,10) closes at 12 s
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000")
	h.pipe("in", "b", "x", 9_000)  // late
	h.pipe("in", "c", "x", 35_000) // closes [10,20)
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000 a=[10,20]=1@11000 c=[10,20]=1@12000")
	// A restart restores the last emit's close time: nothing is emitted again.
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("in", "d", "x", 36_000)
	h.pipe("in", "d", "x", 52_000)
	h.want("out", false, "a=[0,10]=1@3000 b=[0,10]=2@8000 a=[10,20]=1@11000 c=[10,20]=1@12000 c=[30,40]=1@35000 d=[30,40]=1@36000")
}

// An aborted transaction takes the last emit's close time back: the windows whose
// emission failed come out when the record is processed again.
func TestEmitOnWindowCloseRollsBack(t *testing.T) {
	failed := false
	boom := func(k string) {
		if k == "boom" && !failed {
			failed = true
			panic("boom")
		}
	}
	h := run(t, tumblingOnClose(boom))
	h.pipe("in", "a", "x", 1_000)
	h.pipe("in", "boom", "x", 2_000)
	if err := h.d.PipeRaw("in", []byte("x"), []byte("x"), nil, at(12_000)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the failing record: %v", err)
	}
	h.want("out", false, "")
	h.pipe("in", "x", "x", 12_000)
	h.want("out", false, "a=[0,10]=1@1000 boom=[0,10]=1@2000")
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
	h.want("out", false, "b=[1,1]=1@1000 a=[2,5]=3@5000 c=[9,11]=3@11500")
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
