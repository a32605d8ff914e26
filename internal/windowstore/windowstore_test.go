package windowstore_test

import (
	"bytes"
	"fmt"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/windowkey"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/window"
)

type change struct{ key, value []byte }

type recorder struct{ changes []change }

func (r *recorder) WriteChange(_ string, key, value []byte) error {
	r.changes = append(r.changes, change{bytes.Clone(key), bytes.Clone(value)})
	return nil
}

func ms(n int64) time.Time { return window.Millis(n) }

// newSet registers the store name in time segments of be, as a task does.
func newSet(t testing.TB, be kvstore.Backend, name string, spec kvstore.SegmentSpec) (*kvstore.Set, *kvstore.Buffer) {
	t.Helper()
	set := kvstore.NewSet(be)
	buf, err := set.RegisterIn(name, true, kvstore.NewSegmented(be, name, spec))
	if err != nil {
		t.Fatal(err)
	}
	return set, buf
}

// commit logs the set's changes and flushes it, as a task's commit does.
func commit(t testing.TB, set *kvstore.Set) []change {
	t.Helper()
	var r recorder
	if err := set.LogChanges(&r); err != nil {
		t.Fatal(err)
	}
	if err := set.Flush(nil); err != nil {
		t.Fatal(err)
	}
	return r.changes
}

// collect renders a sequence's windows; an error ends the list as "error: ...".
func collect[K, V any](seq iter.Seq2[window.Windowed[K], V], errf func() error) []string {
	var out []string
	for w, v := range seq {
		out = append(out, fmt.Sprintf("%v@%d-%d=%v", w.Key, w.Window.StartMs(), w.Window.EndMs(), v))
	}
	if err := errf(); err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func TestWindowStoreFetch(t *testing.T) {
	set, buf := newSet(t, kvstore.NewMemoryBackend(), "w", windowstore.WindowSegments(time.Hour))
	ws := windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Millisecond, time.Hour)
	for _, p := range []struct {
		k     string
		v     string
		start int64
	}{{"a", "a0", 0}, {"a", "a20", 20}, {"a", "a10", 10}, {"b", "b10", 10}, {"a\x00\x00\x00\x00\x00\x00\x00\x0a", "x", 10}} {
		if err := ws.Put(p.k, p.v, ms(p.start)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		got := collect(ws.FetchRange("a", ms(5), ms(20)))
		if want := []string{"a@10-20=a10", "a@20-30=a20"}; !slices.Equal(got, want) {
			t.Errorf("%s: FetchRange(a, 5, 20) = %q, want %q (a key with a's bytes as prefix excluded)", when, got, want)
		}
		got = collect(ws.BackwardFetchRange("a", ms(0), ms(100)))
		if want := []string{"a@20-30=a20", "a@10-20=a10", "a@0-10=a0"}; !slices.Equal(got, want) {
			t.Errorf("%s: BackwardFetchRange(a, 0, 100) = %q, want %q", when, got, want)
		}
		if v, ok, err := ws.Fetch("b", ms(10)); err != nil || !ok || v != "b10" {
			t.Errorf("%s: Fetch(b, 10) = %q %v %v", when, v, ok, err)
		}
		if _, ok, err := ws.Fetch("b", ms(0)); err != nil || ok {
			t.Errorf("%s: Fetch(b, 0) found a window never put (%v)", when, err)
		}
	}
	check("buffered")
	changes := commit(t, set)
	check("flushed")
	// The changelog keys are Kafka Streams' window store keys: key | start | seqnum 0.
	want := windowkey.AppendWindowStore(nil, []byte("a"), 20, 0)
	if !slices.ContainsFunc(changes, func(c change) bool { return bytes.Equal(c.key, want) && string(c.value) == "a20" }) {
		t.Errorf("changelog %q lacks key % x = a20", changes, want)
	}
	if len(changes) != 5 {
		t.Errorf("%d changelog records, want 5", len(changes))
	}
}

// TestWindowStoreRetention: as Kafka Streams' InMemoryWindowStore, a window that starts
// at or before observed - retention (observed: the latest start put) is neither stored
// nor returned; the observed time survives a reopen (found in the data) and returns to
// its committed value when a transaction aborts.
func TestWindowStoreRetention(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	set, buf := newSet(t, be, "w", windowstore.WindowSegments(50*time.Millisecond))
	ws := windowstore.NewWindowStore(buf, "t", serde.String(), serde.String(), 10*time.Millisecond, 50*time.Millisecond)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ws.Put("k", "0", ms(0)))
	must(ws.Put("k", "40", ms(40)))
	commit(t, set)
	if got := collect(ws.FetchRange("k", ms(0), ms(100))); len(got) != 2 {
		t.Fatalf("before expiry: %q", got)
	}
	// An aborted transaction's put does not advance the store's time.
	must(ws.Put("k", "60", ms(60)))
	set.Discard()
	if got := collect(ws.FetchRange("k", ms(0), ms(100))); len(got) != 2 {
		t.Fatalf("after an aborted put at 60, the window at 0 expired: %q", got)
	}
	must(ws.Put("k", "50", ms(50))) // observed 50: the window at 0 is expired (0 <= 50-50)
	if got, want := collect(ws.FetchRange("k", ms(0), ms(100))), []string{"k@40-50=40", "k@50-60=50"}; !slices.Equal(got, want) {
		t.Fatalf("after put at 50: %q, want %q", got, want)
	}
	if _, ok, _ := ws.Fetch("k", ms(0)); ok {
		t.Fatal("Fetch returns an expired window")
	}
	must(ws.Put("k", "late", ms(0))) // dropped
	for _, c := range commit(t, set) {
		if string(c.value) == "late" {
			t.Fatalf("a put of an expired window reached the changelog: %q", c)
		}
	}
	// Reopened over the same backend: the observed time is found in the data.
	_, buf2 := newSet(t, be, "w", windowstore.WindowSegments(50*time.Millisecond))
	ws2 := windowstore.NewWindowStore(buf2, "t", serde.String(), serde.String(), 10*time.Millisecond, 50*time.Millisecond)
	if got, want := collect(ws2.FetchRange("k", ms(0), ms(100))), []string{"k@40-50=40", "k@50-60=50"}; !slices.Equal(got, want) {
		t.Fatalf("reopened: %q, want %q", got, want)
	}
}

func TestSessionStore(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	set, buf := newSet(t, be, "s", windowstore.SessionSegments(100*time.Millisecond))
	ss := windowstore.NewSessionStore(buf, "t", serde.String(), serde.Int64(), 100*time.Millisecond)
	sess := func(k string, start, end int64) window.Windowed[string] {
		return window.Windowed[string]{Key: k, Window: window.At(start, end)}
	}
	for i, s := range []window.Windowed[string]{sess("a", 10, 20), sess("a", 0, 5), sess("a", 30, 30), sess("b", 12, 18), sess("a", 25, 40)} {
		if err := ss.Put(s, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Sessions of a that end at or after 15 and start at or before 30, by end then start.
	got := collect(ss.FindSessions("a", ms(15), ms(30)))
	if want := []string{"a@10-20=0", "a@30-30=2", "a@25-40=4"}; !slices.Equal(got, want) {
		t.Fatalf("FindSessions(a, 15, 30) = %q, want %q", got, want)
	}
	got = collect(ss.BackwardFindSessions("a", ms(15), ms(29)))
	if want := []string{"a@25-40=4", "a@10-20=0"}; !slices.Equal(got, want) {
		t.Fatalf("BackwardFindSessions(a, 15, 29) = %q, want %q", got, want)
	}
	if err := ss.Remove(sess("a", 10, 20)); err != nil {
		t.Fatal(err)
	}
	changes := commit(t, set)
	removed := windowkey.AppendSession(nil, []byte("a"), 10, 20)
	if !slices.ContainsFunc(changes, func(c change) bool { return bytes.Equal(c.key, removed) && c.value == nil }) {
		t.Fatalf("changelog %q has no tombstone for key % x (a | end 20 | start 10)", changes, removed)
	}
	if v, ok, err := ss.Fetch("b", ms(12), ms(18)); err != nil || !ok || v != 3 {
		t.Fatalf("Fetch(b, 12, 18) = %d %v %v", v, ok, err)
	}
	// Retention 100: a session ending at 140 expires those ending at or before 40.
	if err := ss.Put(sess("c", 140, 140), 9); err != nil {
		t.Fatal(err)
	}
	if got := collect(ss.All()); !slices.Equal(got, []string{"c@140-140=9"}) {
		t.Fatalf("after the session at 140: %q", got)
	}
	if err := ss.Put(sess("d", 0, 40), 1); err != nil { // expired: dropped
		t.Fatal(err)
	}
	if changes := commit(t, set); len(changes) != 1 {
		t.Fatalf("an expired session reached the changelog: %q", changes)
	}
}

// A store that retains duplicates keeps every put of one key and time, in put order,
// skips nulls (which still advance its observed stream time), and after a restart
// numbers new puts after the restored ones.
func TestWindowStoreRetainsDuplicates(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	set, buf := newSet(t, be, "j", windowstore.WindowSegments(100*time.Millisecond))
	ws := windowstore.NewWindowStore(buf, "j-changelog", serde.String(), serde.Nullable(serde.String()), 10*time.Millisecond, 100*time.Millisecond, windowstore.RetainDuplicates())
	s := func(v string) *string { return &v }
	for _, p := range []struct {
		v  *string
		ts int64
	}{{s("x1"), 10}, {s("x2"), 10}, {nil, 10}, {s("x3"), 5}, {s("x4"), 10}} {
		if err := ws.Put("a", p.v, ms(p.ts)); err != nil {
			t.Fatal(err)
		}
	}
	render := func(seq iter.Seq2[window.Windowed[string], *string], errf func() error) []string {
		var out []string
		for w, v := range seq {
			out = append(out, fmt.Sprintf("%d=%s", w.Window.StartMs(), *v))
		}
		if err := errf(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := render(ws.FetchRange("a", ms(0), ms(20))), []string{"5=x3", "10=x1", "10=x2", "10=x4"}; !slices.Equal(got, want) {
		t.Fatalf("FetchRange = %q, want %q", got, want)
	}
	if _, ok, err := ws.Fetch("a", ms(10)); ok || err != nil {
		t.Fatalf("Fetch of a store of duplicates = %v, %v; want nothing", ok, err)
	}
	changes := commit(t, set)
	var seqs []int32
	for _, c := range changes {
		_, _, seq, err := windowkey.SplitWindowStore(c.key)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	if want := []int32{1, 2, 3, 4}; !slices.Equal(seqs, want) {
		t.Fatalf("changelog sequence numbers %v, want %v (a null is not stored)", seqs, want)
	}
	// A null at 200 advances observed stream time: 10 is now expired (200 - 100).
	if err := ws.Put("a", nil, ms(200)); err != nil {
		t.Fatal(err)
	}
	if got := render(ws.FetchRange("a", ms(0), ms(300))); len(got) != 0 {
		t.Fatalf("after a null at 200, FetchRange = %q, want nothing (expired)", got)
	}
	// Restart: a new store over the flushed data numbers its puts after 4.
	set2, buf2 := newSet(t, be, "j", windowstore.WindowSegments(100*time.Millisecond))
	ws2 := windowstore.NewWindowStore(buf2, "j-changelog", serde.String(), serde.Nullable(serde.String()), 10*time.Millisecond, 100*time.Millisecond, windowstore.RetainDuplicates())
	if err := ws2.Put("a", s("x5"), ms(10)); err != nil {
		t.Fatal(err)
	}
	if got, want := render(ws2.FetchRange("a", ms(0), ms(20))), []string{"5=x3", "10=x1", "10=x2", "10=x4", "10=x5"}; !slices.Equal(got, want) {
		t.Fatalf("after restart, FetchRange = %q, want %q", got, want)
	}
	_ = set2
}

// A null put into a store of duplicates writes nothing, yet the time it advanced stays
// advanced after the commit (and after a reopen): the windows it expired stay expired,
// as in Kafka Streams, where the join's outcome depends on it (J4 seed 27). An aborted
// null advances nothing.
func TestWindowStoreDuplicatesNullTimeOutlivesCommit(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	spec := windowstore.WindowSegments(100 * time.Millisecond)
	set, buf := newSet(t, be, "j", spec)
	ws := windowstore.NewWindowStore(buf, "j-changelog", serde.String(), serde.Nullable(serde.String()), 10*time.Millisecond, 100*time.Millisecond, windowstore.RetainDuplicates())
	x := "x"
	if err := ws.Put("a", &x, ms(10)); err != nil {
		t.Fatal(err)
	}
	commit(t, set)
	count := func(ws statestore.WindowStore[string, *string]) int {
		n := 0
		seq, errf := ws.FetchRange("a", ms(0), ms(300))
		for range seq {
			n++
		}
		if err := errf(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Aborted: the null's time is dropped with the transaction.
	if err := ws.Put("a", nil, ms(200)); err != nil {
		t.Fatal(err)
	}
	set.Discard()
	if err := ws.Put("a", &x, ms(20)); err != nil {
		t.Fatal(err)
	}
	commit(t, set)
	if n := count(ws); n != 2 {
		t.Fatalf("after an aborted null at 200 and a committed put at 20: %d windows, want 2", n)
	}
	if err := ws.Put("a", nil, ms(200)); err != nil {
		t.Fatal(err)
	}
	if changes := commit(t, set); len(changes) != 0 {
		t.Fatalf("a null into a store of duplicates reached the changelog: %q", changes)
	}
	if n := count(ws); n != 0 {
		t.Fatalf("after a committed null at 200: %d windows, want 0 (10 expired: 200 - 100)", n)
	}
	_, buf2 := newSet(t, be, "j", spec)
	ws2 := windowstore.NewWindowStore(buf2, "j-changelog", serde.String(), serde.Nullable(serde.String()), 10*time.Millisecond, 100*time.Millisecond, windowstore.RetainDuplicates())
	if n := count(ws2); n != 0 {
		t.Fatalf("reopened after a committed null at 200: %d windows, want 0", n)
	}
}

// A sealed commit (kvstore.Set.Seal, the overlapped commit) keeps the observed stream
// time its puts advanced while it commits, and so does the open one after it: the
// sealed commit's flush ends only its own part, a discard ends both.
func TestWindowStoreObservedTimeAcrossASeal(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	set, buf := newSet(t, be, "w", windowstore.WindowSegments(50*time.Millisecond))
	ws := windowstore.NewWindowStore(buf, "t", serde.String(), serde.String(), 10*time.Millisecond, 50*time.Millisecond)
	observed := func(want int64, when string) {
		t.Helper()
		got, err := ws.(interface{ ObservedTime() (int64, error) }).ObservedTime()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: observed time %d, want %d", when, got, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ws.Put("k", "10", ms(10)))
	commit(t, set)
	must(ws.Put("k", "40", ms(40)))
	must(set.LogChanges(&recorder{}))
	must(set.Seal())
	observed(40, "sealed commit at 40 under way")
	must(ws.Put("k", "70", ms(70)))
	observed(70, "open commit at 70 over the sealed one")
	must(set.Flush(nil)) // the sealed commit committed
	observed(70, "after the sealed commit's flush, the open one's put at 70")
	set.Discard() // the open commit aborted
	observed(40, "after the open commit's discard")

	must(ws.Put("k", "45", ms(45)))
	must(set.Seal())
	must(ws.Put("k", "90", ms(90)))
	set.Discard() // the sealed commit aborted: both go
	observed(40, "after a discard while sealed")
	if got, want := collect(ws.FetchRange("k", ms(0), ms(100))), []string{"k@10-20=10", "k@40-50=40"}; !slices.Equal(got, want) {
		t.Fatalf("after the discard: %q, want %q", got, want)
	}
}
