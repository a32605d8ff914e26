package stream_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// joinKind selects the join a test builds.
type joinKind int

const (
	innerJoin joinKind = iota
	leftJoin
	outerJoin
)

// buildJoin joins "l" and "r" (string keys, nullable string values) into "out", the
// joiner rendering a missing side as "-".
func buildJoin(kind joinKind, w window.JoinWindows, opts ...stream.Option) *stream.Builder {
	b := stream.NewBuilder()
	str, nstr := serde.String(), serde.Nullable(serde.String())
	l := stream.From(b, str, nstr, []string{"l"})
	r := stream.From(b, str, nstr, []string{"r"})
	j := stream.JoinedWith(str, nstr, nstr)
	or := func(s **string) string {
		if s == nil {
			return "-"
		}
		return **s
	}
	var out stream.Stream[string, string]
	switch kind {
	case innerJoin:
		out = stream.StreamJoin(l, r, func(a, c *string) string { return *a + "+" + *c }, w, j, opts...)
	case leftJoin:
		out = stream.StreamLeftJoin(l, r, func(a *string, c **string) string { return *a + "+" + or(c) }, w, j, opts...)
	case outerJoin:
		out = stream.StreamOuterJoin(l, r, func(a **string, c **string) string { return or(a) + "+" + or(c) }, w, j, opts...)
	}
	out.To("out", str, str)
	return b
}

// 5 s either way, 2 s of grace: J1 of the differential tests.
var joinW = window.JoinTimeDifference(5*time.Second, 2*time.Second)

// An inner join emits a result when the second record of a pair arrives, with the later
// timestamp of the two, one per buffered record of the other side in time order
// (duplicates of a key and time included); records further apart than the window, and
// null values, join nothing.
func TestStreamJoinInner(t *testing.T) {
	h := run(t, buildJoin(innerJoin, joinW))
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("r", "a", "R1", 3_000)  // joins L1: max(1 s, 3 s)
	h.pipe("r", "a", "R2", 7_000)  // 6 s after L1: no join
	h.pipe("r", "a", "R1b", 3_000) // a duplicate of key and time: joins L1 too
	h.pipe("l", "a", "L2", 6_500)  // joins R1, R1b (3 s) and R2 (7 s), in time then arrival order
	h.pipe("l", "a", "<nil>", 6_500)
	h.pipe("r", "b", "R3", 6_500) // another key
	h.pipe("l", "a", "L3", 500)   // out of order: joins R1 and R1b, at their time
	h.want("out", false, "a=L1+R1@3000 a=L1+R1b@3000 a=L2+R1@6500 a=L2+R1b@6500 a=L2+R2@7000 a=L3+R1@3000 a=L3+R1b@3000")
}

// A left join holds a left record that found nothing until its window closes — stream
// time (of both sides) past its time + after + grace — and then emits it with the right
// side nil, at its own timestamp, before what the record that closed it causes. A left
// record that finds a partner is never emitted unmatched, even when the partner comes
// later.
func TestStreamLeftJoinEmitsUnmatchedWhenWindowCloses(t *testing.T) {
	h := run(t, buildJoin(leftJoin, joinW))
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("l", "b", "L2", 2_000)
	h.pipe("r", "b", "R1", 6_000) // joins L2: L2 is never emitted unmatched
	h.pipe("r", "c", "R2", 8_000) // stream time 8 s: L1's window closes after 1+5+2 = 8 s
	h.want("out", false, "b=L2+R1@6000")
	h.pipe("r", "c", "R3", 8_001) // now it has closed
	h.want("out", false, "b=L2+R1@6000 a=L1+-@1000")
	h.pipe("l", "c", "L3", 8_002) // joins R2 and R3
	h.want("out", false, "b=L2+R1@6000 a=L1+-@1000 c=L3+R2@8002 c=L3+R3@8002")
}

// A left record whose window has already passed in stream time when it arrives, and
// found nothing, is emitted at once; the right side of a left join is never emitted
// unmatched.
func TestStreamLeftJoinLateRecordAtOnce(t *testing.T) {
	h := run(t, buildJoin(leftJoin, joinW))
	h.pipe("r", "x", "R0", 20_000)
	h.pipe("l", "a", "L1", 14_999) // 14.999 + 5 < 20: emitted now
	h.pipe("l", "a", "L2", 15_000) // 15 + 5 = 20: waits
	h.want("out", false, "a=L1+-@14999")
	h.pipe("r", "x", "R1", 22_001) // closes L2 (15 + 5 + 2 = 22)
	h.want("out", false, "a=L1+-@14999 a=L2+-@15000")
}

// An outer join emits unmatched records of both sides, in the shared store's order:
// by timestamp, right before left at equal times, then by key; a right record's window
// closes before + grace after it. The store is only looked at when its earliest record
// may have closed by the processing side's measure (Kafka Streams' minTime check: a
// left record checks earliest + after + grace): R2, closed at 2.001 s, waits for the
// next right record.
func TestStreamOuterJoinEmitsBothSides(t *testing.T) {
	h := run(t, buildJoin(outerJoin, window.JoinTimeDifference(5*time.Second, 0).Before(time.Second)))
	h.pipe("l", "b", "L1", 1_000) // closes after 1 + 5 (after)
	h.pipe("r", "a", "R1", 1_000) // closes after 1 + 1 (before)
	h.pipe("l", "a", "L2", 1_000) // R1 (1 s) is in [1 - 1, 1 + 5]: joins
	h.pipe("r", "c", "R2", 1_000)
	h.pipe("l", "z", "L3", 2_001) // R2 has closed (1 + 1 < 2.001), but 1 + 5 >= 2.001
	h.want("out", false, "a=L2+R1@1000")
	h.pipe("r", "z", "R3", 6_001) // L1 closes; L3 is in R3's window: joins
	h.want("out", false, "a=L2+R1@1000 c=-+R2@1000 b=L1+-@1000 z=L3+R3@6001")
	h.pipe("l", "q", "L4", 100_000) // nothing left to emit but L4's own wait
	h.want("out", false, "a=L2+R1@1000 c=-+R2@1000 b=L1+-@1000 z=L3+R3@6001")
}

// Before and After set the window per side: a left record at t joins right records in
// [t - before, t + after], a right record at t left records in [t - after, t + before].
func TestStreamJoinAsymmetricWindows(t *testing.T) {
	w := window.JoinTimeDifference(0, 10*time.Second).Before(time.Second).After(3 * time.Second)
	h := run(t, buildJoin(innerJoin, w))
	h.pipe("l", "a", "L10", 10_000)
	h.pipe("r", "a", "R8", 8_999)   // 1.001 s before L10: no
	h.pipe("r", "a", "R9", 9_000)   // 1 s before: joins
	h.pipe("r", "a", "R13", 13_000) // 3 s after: joins
	h.pipe("r", "a", "R14", 13_001) // no
	h.pipe("l", "a", "L12", 12_000) // right in [11 s, 15 s]: R13, R14
	h.want("out", false, "a=L10+R9@10000 a=L10+R13@13000 a=L12+R13@13000 a=L12+R14@13001")
}

// A left (outer) record with a null key is emitted at once, unjoined; null values are
// dropped on every side.
func TestStreamOuterJoinNulls(t *testing.T) {
	b := stream.NewBuilder()
	nstrKey := serde.Nullable(serde.String())
	nstr := serde.Nullable(serde.String())
	l := stream.From(b, nstrKey, nstr, []string{"l"})
	r := stream.From(b, nstrKey, nstr, []string{"r"})
	stream.StreamOuterJoin(l, r, func(a, c **string) string {
		s := func(p **string) string {
			if p == nil {
				return "-"
			}
			return **p
		}
		return s(a) + "+" + s(c)
	}, joinW, stream.JoinedWith(nstrKey, nstr, nstr)).To("out", nstrKey, serde.String())
	h := run(t, b)
	if err := h.d.PipeRaw("l", nil, []byte("L0"), nil, at(1_000)); err != nil {
		t.Fatal(err)
	}
	if err := h.d.PipeRaw("r", nil, []byte("R0"), nil, at(1_000)); err != nil {
		t.Fatal(err)
	}
	h.pipe("l", "a", "<nil>", 1_000)
	h.pipe("r", "a", "<nil>", 1_000)
	h.pipe("l", "a", "L1", 1_000)
	got := h.out("out", false)
	if got != "=L0+-@1000 =-+R0@1000" {
		t.Fatalf("got %s, want the two null-key records, unjoined", got)
	}
}

// The join's stores have Kafka Streams' names, with changelogs; the shared store's
// changelog keys are timestamp | side | key (TimestampedKeyAndJoinSide), and its
// values Kafka's list serde of side-tagged values.
func TestStreamJoinStoresAndChangelogs(t *testing.T) {
	h := run(t, buildJoin(leftJoin, joinW))
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("l", "a", "L1b", 1_000)
	for _, s := range []string{"KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-OUTEROTHER-0000000005-store", "KSTREAM-OUTERSHARED-0000000004-store"} {
		if topic := h.d.ChangelogTopic(s); topic != "topologytest-"+s+"-changelog" {
			t.Errorf("store %s: changelog topic %q", s, topic)
		}
	}
	recs := h.d.Records(h.d.ChangelogTopic("KSTREAM-OUTERSHARED-0000000004-store"))
	if len(recs) != 2 {
		t.Fatalf("shared store changelog has %d records, want 2", len(recs))
	}
	k, v := recs[1].Key, recs[1].Value
	if ts := int64(binary.BigEndian.Uint64(k)); ts != at(1_000).UnixMilli() || k[8] != 1 || string(k[9:]) != "a" {
		t.Errorf("shared store key %x: want timestamp, 1 (left), a", k)
	}
	want := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 'L', '1', 0, 0, 0, 4, 1, 'L', '1', 'b'}
	if string(v) != string(want) {
		t.Errorf("shared store value %v, want %v", v, want)
	}
	thisLog := h.d.Records(h.d.ChangelogTopic("KSTREAM-JOINTHIS-0000000004-store"))
	if len(thisLog) != 2 || string(thisLog[0].Key[len(thisLog[0].Key)-4:]) == string(thisLog[1].Key[len(thisLog[1].Key)-4:]) {
		t.Errorf("this-store changelog: %d records, want 2 with distinct sequence numbers", len(thisLog))
	}
}

// Named and Materialized name the nodes and stores as StreamJoined.withName and
// withStoreName do.
func TestStreamJoinNamedStores(t *testing.T) {
	b := buildJoin(outerJoin, joinW, stream.Named("j"), stream.Materialized("s"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	desc := topo.Describe()
	for _, want := range []string{"j-this-windowed", "j-other-windowed", "j-outer-this-join", "j-outer-other-join", "j-merge",
		"s-outer-this-join", "s-outer-other-join", "s-outer-shared-join-store"} {
		if !strings.Contains(desc, want) {
			t.Errorf("topology lacks %q:\n%s", want, desc)
		}
	}
}

// Unmatched records wait in the shared store across a restart (restored from its
// changelog) and are emitted when their windows close after it; the buffered records
// still join.
func TestStreamLeftJoinAcrossRestart(t *testing.T) {
	h := run(t, buildJoin(leftJoin, joinW))
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("l", "b", "L2", 2_000)
	if err := h.d.Restart(); err != nil {
		t.Fatal(err)
	}
	h.pipe("r", "b", "R1", 3_000) // joins the restored L2
	h.pipe("r", "c", "R2", 8_001) // closes L1
	h.want("out", false, "b=L2+R1@3000 a=L1+-@1000")
}

// An aborted transaction takes the join's state back: the shared store's writes and the
// stream time both sides share. The record at 100 s closes L2's window, and emitting it
// fails downstream; after the abort, L2's window is open again (stream time 50.001 s),
// as if the record had never come, and L2 still joins.
func TestStreamJoinRollsBackWithAbortedTransaction(t *testing.T) {
	b := stream.NewBuilder()
	str, nstr := serde.String(), serde.Nullable(serde.String())
	l := stream.From(b, str, nstr, []string{"l"})
	r := stream.From(b, str, nstr, []string{"r"})
	out := stream.StreamLeftJoin(l, r, func(a *string, c **string) string {
		if c == nil {
			return *a + "+-"
		}
		return *a + "+" + **c
	}, joinW, stream.JoinedWith(str, nstr, nstr))
	stream.MapValues(out, func(_ string, v string) string {
		if v == "L2+-" {
			panic("boom")
		}
		return v
	}).To("out", str, str)
	h := run(t, b)
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("r", "x", "R0", 50_000) // L1 closes
	h.want("out", false, "a=L1+-@1000")
	h.pipe("l", "c", "L2", 50_001)
	if err := h.d.PipeRaw("l", []byte("x"), []byte("X"), nil, at(100_000)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the failing record: %v", err)
	}
	h.pipe("r", "y", "R1", 57_001) // L2 closes after 50.001 + 5 + 2 = 57.001 s
	h.pipe("r", "c", "R2", 52_000) // L2 is still in the store: joins, and is never emitted unmatched
	h.pipe("r", "y", "R3", 57_002)
	h.want("out", false, "a=L1+-@1000 c=L2+R2@52000")
}

// The join validates its windows and needs its serdes.
func TestStreamJoinInvalid(t *testing.T) {
	b := buildJoin(innerJoin, window.JoinTimeDifference(time.Second, -time.Second))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "grace period must not be negative") {
		t.Errorf("negative grace: %v", err)
	}
	b = buildJoin(innerJoin, window.JoinTimeDifference(time.Second, 0).Before(-2*time.Second))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "before + after must not be negative") {
		t.Errorf("negative window: %v", err)
	}
	b = stream.NewBuilder()
	l := stream.From(b, serde.String(), serde.String(), []string{"l"})
	stream.StreamJoin(l, l, func(a, c string) string { return a + c }, joinW, stream.Joined[string, string, string]{})
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "JoinedWith") {
		t.Errorf("no serdes: %v", err)
	}
}

// A record's window closes when stream time passes its time + its side's look-ahead +
// grace, not when it reaches it: with after 5 s and before 1 s, a right record at 6 s
// (whose own check, 1 + 1 < 6, looks at the store) leaves L1 at 1 s waiting (1 + 5 = 6),
// and one at 6.001 s emits it.
func TestStreamLeftJoinClosesAfterNotAtWindowEnd(t *testing.T) {
	h := run(t, buildJoin(leftJoin, window.JoinTimeDifference(5*time.Second, 0).Before(time.Second)))
	h.pipe("l", "a", "L1", 1_000)
	h.pipe("r", "x", "R1", 6_000)
	h.want("out", false, "")
	h.pipe("r", "x", "R2", 6_001)
	h.want("out", false, "a=L1+-@1000")
}

// A side whose key changed (here both) is repartitioned by its new key with the Joined
// serdes before the join, as Kafka Streams' KStreamImpl.doJoin does; the join then
// meets the records in the task of their new key.
func TestStreamJoinRepartitionsKeyChangedSides(t *testing.T) {
	b := stream.NewBuilder()
	str := serde.String()
	byPrefix := func(_ string, v string) string { return v[:1] }
	l := stream.SelectKey(stream.From(b, str, str, []string{"l"}), byPrefix)
	r := stream.SelectKey(stream.From(b, str, str, []string{"r"}), byPrefix)
	stream.StreamJoin(l, r, func(a, c string) string { return a + "+" + c }, joinW, stream.JoinedWith(str, str, str)).To("out", str, str)
	h := run(t, b)
	h.pipe("l", "k1", "aL", 1_000)
	h.pipe("r", "k2", "aR", 2_000)
	h.pipe("r", "k3", "bR", 2_000)
	h.want("out", false, "a=aL+aR@2000")
	for _, topic := range []string{"topologytest-KSTREAM-KEY-SELECT-0000000001-left-repartition", "topologytest-KSTREAM-KEY-SELECT-0000000003-right-repartition"} {
		if n := len(h.d.Records(topic)); n == 0 {
			t.Errorf("repartition topic %s is empty", topic)
		}
	}
}

// The look for closed windows goes through the shared store value by value, as Kafka
// Streams' ListValueStore iterates it, and stops at the first value after both sides
// have met an open window, leaving minTime at that value's time. Here it stops at the
// second of L1, L2 (4 s), not at L3 (5 s), so the record at 11.25 s looks again and
// emits R2, L1 and L2 (found by the differential test J3, seed 10).
func TestStreamOuterJoinScansValueByValue(t *testing.T) {
	h := run(t, buildJoin(outerJoin, joinW))
	h.pipe("r", "k3", "R1", 10_000)
	h.pipe("l", "k2", "L1", 14_000)
	h.pipe("l", "k2", "L2", 14_000)
	h.pipe("r", "k1", "R2", 14_000)
	h.pipe("l", "k2", "L3", 15_000)
	h.pipe("r", "k1", "R3", 20_750) // emits R1; R2 and k2's L1 are open; stops at L2
	h.pipe("l", "k2", "L4", 21_250)
	h.want("out", false, "k3=-+R1@10000 k1=-+R2@14000 k2=L1+-@14000 k2=L2+-@14000")
}
