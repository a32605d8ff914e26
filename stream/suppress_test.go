package stream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// windowedOut writes a windowed table's updates to "out" as key "k" and value
// "[start,end]=n" in seconds since t0 ("<nil>" for a deletion); boom, when not nil, is
// called with each key first (to fail a transaction).
func windowedOut(t stream.Table[window.Windowed[string], int64], boom func(string)) {
	stream.Map(stream.ToStream(t), func(k window.Windowed[string], v *int64) (string, string) {
		if boom != nil {
			boom(k.Key)
		}
		s := fmt.Sprintf("[%d,%d]=", k.Window.Start.Sub(t0).Milliseconds()/1000, k.Window.End.Sub(t0).Milliseconds()/1000)
		if v == nil {
			return k.Key, s + "<nil>"
		}
		return k.Key, s + fmt.Sprint(*v)
	}).To("out", serde.String(), serde.String())
}

// tumblingSuppressed is a count per key in tumbling 10 s windows with 2 s of grace,
// suppressed until the windows close.
func tumblingSuppressed(boom func(string), opts ...stream.BuilderOption) *stream.Builder {
	b := stream.NewBuilder(opts...)
	counts := stream.From(b, serde.String(), serde.String(), []string{"in"}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Count()
	windowedOut(counts.Suppress(stream.UntilWindowCloses(stream.Unbounded()), stream.Named("final")), boom)
	return b
}

// Final results: each window once, when the suppression's stream time reaches its end
// plus grace (12 s for [0, 10 s)), with its last count and the timestamp of its last
// update; windows closing together come out by key bytes. Late records change nothing.
func TestSuppressUntilWindowClosesEmitsFinalResults(t *testing.T) {
	for _, caching := range []bool{true, false} {
		t.Run(fmt.Sprint("caching ", caching), func(t *testing.T) {
			var opts []stream.BuilderOption
			if !caching {
				opts = append(opts, stream.NoCaching())
			}
			h := run(t, tumblingSuppressed(nil, opts...))
			h.pipe("in", "b", "x", 1_000)
			h.pipe("in", "a", "x", 3_000)
			h.pipe("in", "b", "x", 9_000)
			h.pipe("in", "a", "x", 11_000) // stream time 11 s: [0,10) still open
			h.pipe("in", "a", "x", 8_000)
			h.want("out", false, "")
			h.pipe("in", "c", "x", 12_000) // closes [0,10)
			h.want("out", false, "a=[0,10]=2@8000 b=[0,10]=2@9000")
			h.pipe("in", "a", "x", 5_000) // late: dropped upstream
			h.pipe("in", "c", "x", 21_999)
			h.want("out", false, "a=[0,10]=2@8000 b=[0,10]=2@9000")
			h.pipe("in", "c", "x", 22_000)
			h.want("out", false, "a=[0,10]=2@8000 b=[0,10]=2@9000 a=[10,20]=1@11000 c=[10,20]=1@12000")
		})
	}
}

// The buffer is a changelogged store: after a restart (state restored from the
// changelogs) the windows buffered before it come out once, when they close, with
// what was counted on both sides of the restart.
func TestSuppressRestartKeepsTheBuffer(t *testing.T) {
	h := run(t, tumblingSuppressed(nil))
	h.pipe("in", "a", "x", 1_000)
	h.pipe("in", "b", "x", 2_000)
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("in", "a", "x", 4_000)
	h.want("out", false, "")
	h.pipe("in", "c", "x", 30_000)
	h.want("out", false, "a=[0,10]=2@4000 b=[0,10]=1@2000")
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("in", "c", "x", 45_000)
	h.want("out", false, "a=[0,10]=2@4000 b=[0,10]=1@2000 c=[30,40]=1@30000")
}

// An aborted transaction takes the buffer back (the store's writes are discarded) and
// the suppression's observed stream time with it: the record at 20 s closes [0, 10 s)
// and its emission fails downstream; after the abort, a record at 9 s is buffered as if
// the one at 20 s had never come (the window stays open), and the window's result comes
// out once, when the record at 20 s is piped again.
func TestSuppressRollsBackWithAbortedTransaction(t *testing.T) {
	failed := false
	boom := func(k string) {
		if k == "boom" && !failed {
			failed = true
			panic("boom")
		}
	}
	h := run(t, tumblingSuppressed(boom))
	h.pipe("in", "a", "x", 1_000)
	h.pipe("in", "boom", "x", 2_000)
	if err := h.d.PipeRaw("in", []byte("x"), []byte("x"), nil, at(20_000)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the failing record: %v", err)
	}
	h.want("out", false, "")
	h.pipe("in", "y", "x", 9_000)
	h.want("out", false, "") // stream time back at 9 s: [0, 10 s) is open
	h.pipe("in", "x", "x", 20_000)
	h.want("out", false, "a=[0,10]=1@1000 boom=[0,10]=1@2000 y=[0,10]=1@9000")
}

// A deletion of a window (a session merged into a longer one) is not a final result:
// final results drop tombstones (Kafka Streams' safeToDropTombstones).
func TestSuppressSessionsDropTombstones(t *testing.T) {
	b := stream.NewBuilder(stream.NoCaching())
	counts := stream.From(b, serde.String(), serde.String(), []string{"in"}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBySession(window.Sessions(5*time.Second, 0)).Count()
	windowedOut(counts.Suppress(stream.UntilWindowCloses(stream.Unbounded())), nil)
	h := run(t, b)
	h.pipe("in", "a", "x", 1_000)
	h.pipe("in", "a", "x", 4_000) // merges [1,1] into [1,4]: a deletion of [1,1], buffered
	h.pipe("in", "b", "x", 8_999)
	h.want("out", false, "")
	h.pipe("in", "b", "x", 9_000) // closes sessions ending at or before 9 s - 5 s (gap) - 0 (grace)
	h.want("out", false, "a=[1,4]=2@4000")
}

// UntilTimeLimit on a plain table: a key's latest value comes out once the stream time
// is 10 s past its first buffered update; with MaxRecords(2).EmitEarlyWhenFull the
// oldest key comes out early when a third is buffered; deletions come out too.
func TestSuppressUntilTimeLimitEmitEarly(t *testing.T) {
	b := stream.NewBuilder(stream.NoCaching())
	tab := stream.TableFrom(b, serde.String(), serde.String(), "in")
	stream.ToStream(tab.Suppress(stream.UntilTimeLimit(10*time.Second, stream.MaxRecords(2).EmitEarlyWhenFull()))).
		To("out", serde.String(), serde.Nullable(serde.String()))
	h := run(t, b)
	h.pipe("in", "a", "1", 1_000)
	h.pipe("in", "b", "1", 2_000)
	h.pipe("in", "a", "2", 3_000) // a keeps its place (1 s)
	h.want("out", false, "")
	h.pipe("in", "c", "1", 4_000) // three keys: a, the oldest, comes out early
	h.want("out", false, "a=2@3000")
	h.pipe("in", "b", "<nil>", 5_000)
	h.pipe("in", "d", "1", 12_000) // b's time (2 s) + 10 s: b's deletion comes out
	h.want("out", false, "a=2@3000 b=<nil>@5000")
	h.pipe("in", "e", "1", 14_000) // c (4 s) due, and d, e within the bound
	h.want("out", false, "a=2@3000 b=<nil>@5000 c=1@4000")
}

// A full buffer with the default policy stops the task with an error naming the store,
// the bound and what to do.
func TestSuppressShutDownWhenFull(t *testing.T) {
	b := stream.NewBuilder(stream.NoCaching())
	tab := stream.TableFrom(b, serde.String(), serde.String(), "in")
	stream.ToStream(tab.Suppress(stream.UntilTimeLimit(time.Minute, stream.MaxRecords(1)), stream.Named("held"))).
		To("out", serde.String(), serde.Nullable(serde.String()))
	h := run(t, b)
	h.pipe("in", "a", "1", 1_000)
	h.pipe("in", "a", "2", 2_000) // the same key: still one record
	err := h.d.PipeRaw("in", []byte("b"), []byte("1"), nil, at(3_000))
	if !errors.Is(err, stream.ErrBufferFull) {
		t.Fatalf("a second key in a buffer of MaxRecords(1): %v, want ErrBufferFull", err)
	}
	for _, want := range []string{"held-store", "MaxRecords(1)", "2 records", "raise MaxRecords"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	h.want("out", false, "")
}

// What Kafka Streams refuses is a Build error naming the node.
func TestSuppressBuildErrors(t *testing.T) {
	b := stream.NewBuilder()
	tab := stream.TableFrom(b, serde.String(), serde.String(), "in")
	tab.Suppress(stream.UntilWindowCloses(stream.Unbounded()), stream.Named("notwindowed"))
	counts := stream.From(b, serde.String(), serde.String(), []string{"w"}).GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(time.Second, 0)).Count()
	counts.Suppress(stream.UntilWindowCloses(stream.MaxRecords(3).EmitEarlyWhenFull()), stream.Named("early"))
	tab.Suppress(stream.Suppressed{}, stream.Named("nobuffer"))
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalid) {
		t.Fatalf("Build: %v, want topology.ErrInvalid", err)
	}
	for _, want := range []string{"notwindowed: UntilWindowCloses applies to windowed tables only", "early: UntilWindowCloses cannot emit early", "nobuffer: Suppress needs a BufferConfig"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	// The names and the store are Kafka Streams'.
	b = stream.NewBuilder()
	tab = stream.TableFrom(b, serde.String(), serde.String(), "in")
	s := tab.Suppress(stream.UntilTimeLimit(time.Second, stream.Unbounded()))
	if s.Name() != "KTABLE-SUPPRESS-0000000003" {
		t.Errorf("the suppression node is %s", s.Name())
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.ChangelogTopic("KTABLE-SUPPRESS-STATE-STORE-0000000004"); got != "app-KTABLE-SUPPRESS-STATE-STORE-0000000004-changelog" {
		t.Errorf("the buffer's changelog is %q", got)
	}
}
