package windowstore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// Retention one minute: segments of one minute (Kafka Streams' floor, 60 s), so a
// window starting at t lives in segment t / 60 s.
const (
	segRetention = time.Minute
	sec          = int64(1000)
)

// segStore is a window store of (string, string) kept in segments of be.
type segStore struct {
	set *kvstore.Set
	seg *kvstore.Segmented
	ws  statestore.WindowStore[string, string]
}

func openSegStore(t testing.TB, be kvstore.Backend) segStore {
	t.Helper()
	set := kvstore.NewSet(be)
	seg := kvstore.NewSegmented(be, "w", windowstore.WindowSegments(segRetention))
	buf, err := set.RegisterIn("w", true, seg)
	if err != nil {
		t.Fatal(err)
	}
	return segStore{set, seg, windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Second, segRetention)}
}

func (s segStore) put(t testing.TB, k, v string, start int64) {
	t.Helper()
	if err := s.ws.Put(k, v, ms(start)); err != nil {
		t.Fatal(err)
	}
}

func (s segStore) segments(t testing.TB) []int64 {
	t.Helper()
	ids, err := s.seg.Segments()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (s segStore) observed(t testing.TB) int64 {
	t.Helper()
	obs, err := s.seg.ObservedTime()
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func openBolt(t testing.TB, dir string) kvstore.Backend {
	t.Helper()
	be, err := kvstore.OpenBolt(dir, kvstore.BoltOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// buckets lists the bbolt buckets of the store "w" in dir (the backend must be closed)
// with their key counts, read from the file itself (InspectBolt shows the store as one).
func buckets(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, kvstore.BoltFileName), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int64{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if strings.HasPrefix(string(name), "w/") {
				out[string(name)] = int64(b.Stats().KeyN)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// InspectBolt and DumpBolt (cmd/eddy's state inspect and dump) show a store in
// segments as one store: its keys, bytes and segment count, and every key once.
func TestSegmentsInspectAndDump(t *testing.T) {
	dir := t.TempDir()
	be := openBolt(t, dir)
	s := openSegStore(t, be)
	s.put(t, "k", "k0", 0)
	s.put(t, "k", "k70", 70*sec)
	s.put(t, "j", "j75", 75*sec)
	if err := s.set.Flush(map[string]int64{"w": 3}); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := kvstore.InspectBolt(dir, kvstore.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Stores) != 1 {
		t.Fatalf("stores %+v, want the one store w", info.Stores)
	}
	if w := info.Stores[0]; w.Name != "w" || w.Keys != 3 || w.Segments != 2 || !w.HasCheckpoint || w.Checkpoint != 3 || w.Bytes == 0 {
		t.Fatalf("store %+v, want w with 3 keys in 2 segments at checkpoint 3", w)
	}
	var dumped []string
	err = kvstore.DumpBolt(dir, "w", kvstore.InspectOptions{}, func(k, v []byte) error {
		dumped = append(dumped, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"k0", "j75", "k70"}; !slices.Equal(dumped, want) {
		t.Fatalf("dumped values %q, want %q (segment by segment, oldest first)", dumped, want)
	}
}

// TestSegmentExpiryDropsTheBucket: when the observed time moves a segment out of
// retention, its bucket is gone from the bbolt file, not merely hidden.
func TestSegmentExpiryDropsTheBucket(t *testing.T) {
	dir := t.TempDir()
	be := openBolt(t, dir)
	s := openSegStore(t, be)
	s.put(t, "k", "k0", 0)
	s.put(t, "k", "k30", 30*sec)
	s.put(t, "j", "j70", 70*sec)
	commit(t, s.set)
	if got := s.segments(t); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("segments %v, want [0 1]", got)
	}
	// Observed 130 s: the oldest live segment is (130 - 60) / 60 = 1; segment 0 expires.
	s.put(t, "k", "k130", 130*sec)
	commit(t, s.set)
	if got := s.segments(t); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("segments after observed 130 s: %v, want [1 2]", got)
	}
	if n, err := be.Count(s.seg.SegmentStore(0)); err != nil || n != 0 {
		t.Fatalf("segment 0 still holds %d keys (%v)", n, err)
	}
	if got, want := collect(s.ws.FetchRange("k", ms(0), ms(200*sec))), []string{"k@130000-140000=k130"}; !slices.Equal(got, want) {
		t.Fatalf("FetchRange(k) = %q, want %q", got, want)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	got := buckets(t, dir)
	want := map[string]int64{"w/segment-1": 1, "w/segment-2": 1, "w/segments": 4} // 2 segments + observed + interval
	if len(got) != len(want) || got["w/segment-1"] != 1 || got["w/segment-2"] != 1 || got["w/segments"] != 4 {
		t.Fatalf("buckets of w in the file: %v, want %v (segment 0 dropped)", got, want)
	}
}

// TestSegmentsAbortKeepsThem: a put far ahead in an aborted transaction neither drops
// segments (the store is never ahead of its changelog) nor advances the observed time.
func TestSegmentsAbortKeepsThem(t *testing.T) {
	s := openSegStore(t, kvstore.NewMemoryBackend())
	s.put(t, "k", "k20", 20*sec)
	s.put(t, "k", "k70", 70*sec)
	commit(t, s.set)
	s.put(t, "k", "k1h", 3600*sec)
	if got := collect(s.ws.FetchRange("k", ms(0), ms(100*sec))); len(got) != 0 {
		t.Fatalf("in the open transaction, observed 1 h hides the old windows: got %q", got)
	}
	if got := s.segments(t); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("segments before the commit: %v, want [0 1] untouched", got)
	}
	s.set.Discard()
	if got := s.segments(t); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("segments after the abort: %v, want [0 1]", got)
	}
	if obs := s.observed(t); obs != 70*sec {
		t.Fatalf("observed after the abort: %d, want %d", obs, 70*sec)
	}
	if got, want := collect(s.ws.FetchRange("k", ms(0), ms(100*sec))), []string{"k@20000-30000=k20", "k@70000-80000=k70"}; !slices.Equal(got, want) {
		t.Fatalf("after the abort: %q, want %q", got, want)
	}
}

// TestSegmentsRestore: the changelog of a store, replayed into an empty backend, lands
// in the same segments, skips records of segments expired by the end of the replay,
// and gives the same observed time and windows.
func TestSegmentsRestore(t *testing.T) {
	src := openSegStore(t, kvstore.NewMemoryBackend())
	var changelog []kvstore.Entry
	for _, p := range []struct {
		k, v  string
		start int64
	}{{"a", "a0", 0}, {"b", "b50", 50 * sec}, {"a", "a70", 70 * sec}, {"a", "a130", 130 * sec}, {"b", "b150", 150 * sec}} {
		src.put(t, p.k, p.v, p.start)
		for _, c := range commit(t, src.set) {
			changelog = append(changelog, kvstore.Entry{Key: c.key, Value: c.value})
		}
	}
	dir := t.TempDir()
	be := openBolt(t, dir)
	dst := openSegStore(t, be)
	if kvstore.CanBulkRestore(dst.seg) {
		t.Fatal("a segmented store offers the bulk restore, which would bypass its segments")
	}
	r := kvstore.NewRestorer(dst.seg, "w", kvstore.RestorerOptions{MaxRecords: 2})
	for i, e := range changelog {
		if err := r.Add([]kvstore.Entry{e}, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.segments(t), src.segments(t); !slices.Equal(got, want) || !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("restored segments %v, source %v, want [1 2]", got, want)
	}
	if got, want := dst.observed(t), src.observed(t); got != want || got != 150*sec {
		t.Fatalf("restored observed %d, source %d, want %d", got, want, 150*sec)
	}
	for _, k := range []string{"a", "b"} {
		got, want := collect(dst.ws.FetchRange(k, ms(0), ms(200*sec))), collect(src.ws.FetchRange(k, ms(0), ms(200*sec)))
		if !slices.Equal(got, want) || len(got) == 0 {
			t.Fatalf("restored FetchRange(%s) = %q, source %q", k, got, want)
		}
	}
	if off, ok, err := dst.seg.Checkpoint("w"); err != nil || !ok || off != int64(len(changelog)) {
		t.Fatalf("checkpoint %d %v %v, want %d", off, ok, err, len(changelog))
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if got := buckets(t, dir); got["w/segment-0"] != 0 || len(got) != 3 {
		t.Fatalf("buckets after the restore: %v (segment 0 expired during the restore)", got)
	}
	// Restored in one batch, the records of segment 0 (expired by the batch's own
	// records) are not written at all.
	cb := &countingBackend{Backend: kvstore.NewMemoryBackend(), reads: map[string]int{}}
	one := openSegStore(t, cb)
	r2 := kvstore.NewRestorer(one.seg, "w", kvstore.RestorerOptions{})
	if err := r2.Add(changelog, int64(len(changelog))); err != nil {
		t.Fatal(err)
	}
	if err := r2.Finish(); err != nil {
		t.Fatal(err)
	}
	if cb.written[one.seg.SegmentStore(0)] != 0 || cb.written[one.seg.SegmentStore(2)] == 0 {
		t.Fatalf("entries written per store: %v (none to segment 0, expired)", cb.written)
	}
}

// countingBackend counts the reads of each store of the backend it wraps.
type countingBackend struct {
	kvstore.Backend
	mu      sync.Mutex
	reads   map[string]int
	writes  int
	written map[string]int // entries written per store
	fail    error          // set: every Write fails with it
}

func (c *countingBackend) count(store string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[store]++
}

func (c *countingBackend) Iterate(store string, from, to []byte) (kvstore.BytesIterator, error) {
	c.count(store)
	return c.Backend.Iterate(store, from, to)
}

func (c *countingBackend) Get(store string, key []byte) ([]byte, error) {
	c.count(store)
	return c.Backend.Get(store, key)
}

func (c *countingBackend) Write(b kvstore.Batch) error {
	if c.fail != nil {
		return c.fail
	}
	c.writes++
	for store, es := range b.Writes {
		if c.written == nil {
			c.written = map[string]int{}
		}
		c.written[store] += len(es)
	}
	return c.Backend.Write(b)
}

// TestSegmentsReopenReadsNoData: a store reopened over its file knows its observed
// time and segments from its segment list, without reading a segment; its first put
// then expires what it must.
func TestSegmentsReopenReadsNoData(t *testing.T) {
	dir := t.TempDir()
	be := openBolt(t, dir)
	s := openSegStore(t, be)
	for i := range int64(100) {
		s.put(t, "k", "v", i*sec)
	}
	commit(t, s.set)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	cb := &countingBackend{Backend: openBolt(t, dir), reads: map[string]int{}}
	defer cb.Close()
	s2 := openSegStore(t, cb)
	if obs := s2.observed(t); obs != 99*sec {
		t.Fatalf("reopened observed %d, want %d", obs, 99*sec)
	}
	if got := s2.segments(t); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("reopened segments %v, want [0 1]", got)
	}
	// A put at 20 s is expired for the reopened store (20 <= 99 - 60): a store that
	// forgot its observed time would take it.
	s2.put(t, "k", "late", 20*sec)
	if changes := commit(t, s2.set); len(changes) != 0 {
		t.Fatalf("the put at 20 s, expired at observed 99 s, was taken: %q", changes)
	}
	for store, n := range cb.reads {
		if strings.HasPrefix(store, "w/segment-") {
			t.Fatalf("opening read segment %s %d times: %v", store, n, cb.reads)
		}
	}
}

// TestSegmentsFlushOneWrite: a flush writes a key-value store and a segmented store of
// the same backend in one write (one bbolt transaction, one fsync).
func TestSegmentsFlushOneWrite(t *testing.T) {
	cb := &countingBackend{Backend: kvstore.NewMemoryBackend(), reads: map[string]int{}}
	set := kvstore.NewSet(cb)
	kv, err := set.Register("kv", true)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := set.RegisterIn("w", true, kvstore.NewSegmented(cb, "w", windowstore.WindowSegments(segRetention)))
	if err != nil {
		t.Fatal(err)
	}
	ws := windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Second, segRetention)
	kv.Put([]byte("x"), []byte("1"))
	if err := ws.Put("k", "v", ms(5*sec)); err != nil {
		t.Fatal(err)
	}
	if err := set.Flush(map[string]int64{"kv": 1, "w": 1}); err != nil {
		t.Fatal(err)
	}
	if cb.writes != 1 {
		t.Fatalf("the flush made %d backend writes, want 1", cb.writes)
	}
	if v, ok, err := ws.Fetch("k", ms(5*sec)); err != nil || !ok || v != "v" {
		t.Fatalf("Fetch after the flush: %q %v %v", v, ok, err)
	}
	if off, ok, _ := cb.Checkpoint("w"); !ok || off != 1 {
		t.Fatalf("checkpoint of w: %d %v", off, ok)
	}
}

// TestSegmentsWipe: a wiped store loses every segment, its list and its checkpoint.
func TestSegmentsWipe(t *testing.T) {
	be := kvstore.NewMemoryBackend()
	s := openSegStore(t, be)
	s.put(t, "k", "a", 0)
	s.put(t, "k", "b", 70*sec)
	if err := s.set.Flush(map[string]int64{"w": 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.seg.Wipe("w"); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{s.seg.SegmentStore(0), s.seg.SegmentStore(1), "w/segments"} {
		if n, _ := be.Count(store); n != 0 {
			t.Fatalf("%s holds %d keys after the wipe", store, n)
		}
	}
	if _, ok, _ := be.Checkpoint("w"); ok {
		t.Fatal("the checkpoint survived the wipe")
	}
	if obs := s.observed(t); obs != kvstore.NoObservedTime {
		t.Fatalf("observed %d after the wipe", obs)
	}
	if got := collect(s.ws.FetchRange("k", ms(0), ms(100*sec))); len(got) != 0 {
		t.Fatalf("after the wipe: %q", got)
	}
}

// TestSegmentsFailedFlush: a flush whose write fails leaves the segments and the
// observed time as they were: the store never runs ahead of what it holds.
func TestSegmentsFailedFlush(t *testing.T) {
	cb := &countingBackend{Backend: kvstore.NewMemoryBackend(), reads: map[string]int{}}
	s := openSegStore(t, cb)
	s.put(t, "k", "a", 20*sec)
	commit(t, s.set)
	s.put(t, "k", "b", 3600*sec)
	cb.fail = errors.New("disk full")
	if err := s.set.Flush(nil); !errors.Is(err, cb.fail) {
		t.Fatalf("Flush = %v, want the write's error", err)
	}
	s.set.Discard()
	if got := s.segments(t); !slices.Equal(got, []int64{0}) {
		t.Fatalf("segments after the failed flush: %v, want [0]", got)
	}
	if obs := s.observed(t); obs != 20*sec {
		t.Fatalf("observed after the failed flush: %d, want %d", obs, 20*sec)
	}
}

// TestSegmentsReadInKeyOrder: reads merge the live segments in key order, under the
// write buffer's entries too.
func TestSegmentsReadInKeyOrder(t *testing.T) {
	s := openSegStore(t, kvstore.NewMemoryBackend())
	// Three segments (0, 1, 2) for a and b, committed; then buffered puts in between.
	for _, p := range []struct {
		k     string
		start int64
	}{{"b", 100}, {"a", 110}, {"a", 55}, {"b", 61}, {"a", 70}, {"b", 5}} {
		s.put(t, p.k, fmt.Sprint(p.start), p.start*sec)
	}
	commit(t, s.set)
	if got := s.segments(t); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("segments %v, want [0 1]", got)
	}
	s.put(t, "a", "80", 80*sec)
	s.put(t, "b", "125", 125*sec)
	want := []string{"a@70000-80000=70", "a@80000-90000=80", "a@110000-120000=110"}
	if got := collect(s.ws.FetchRange("a", ms(0), ms(200*sec))); !slices.Equal(got, want) {
		t.Fatalf("FetchRange(a) = %q, want %q", got, want)
	}
	commit(t, s.set)
	if got := s.segments(t); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("segments %v, want [1 2]", got)
	}
	want = []string{"a@70000-80000=70", "a@80000-90000=80", "a@110000-120000=110", "b@100000-110000=100", "b@125000-135000=125"}
	if got := collect(s.ws.FetchAll(ms(0), ms(200*sec))); !slices.Equal(got, want) {
		t.Fatalf("FetchAll = %q, want %q", got, want)
	}
}

// The changelog of a store in segments can be trimmed below the checkpoint the oldest
// live segment was made at: every record below it belongs to an expired segment. The
// first offsets survive a reopen; a store with no live segment trims to its checkpoint,
// one with none to nothing.
func TestSegmentsTrimOffset(t *testing.T) {
	dir := t.TempDir()
	be := openBolt(t, dir)
	s := openSegStore(t, be)
	trim := func(s segStore) (int64, bool) {
		t.Helper()
		off, ok, err := s.seg.TrimOffset()
		if err != nil {
			t.Fatal(err)
		}
		return off, ok
	}
	flush := func(s segStore, checkpoint int64) {
		t.Helper()
		if err := s.set.Flush(map[string]int64{"w": checkpoint}); err != nil {
			t.Fatal(err)
		}
	}
	s.put(t, "a", "1", 10*sec) // segment 0, made with no checkpoint: first offset 0
	flush(s, 5)
	if off, ok := trim(s); ok {
		t.Fatalf("segment 0 made without a checkpoint: trim below %d, want nothing", off)
	}
	s.put(t, "a", "2", 70*sec) // segment 1, made at checkpoint 5
	flush(s, 9)
	s.put(t, "b", "3", 100*sec) // segment 1 again: its first offset stays 5
	flush(s, 12)
	if off, ok := trim(s); ok {
		t.Fatalf("segment 0 is live: trim below %d, want nothing", off)
	}
	s.put(t, "a", "4", 125*sec) // segment 2 at checkpoint 12; 125 - 60 expires segment 0
	flush(s, 20)
	if got := s.segments(t); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("segments %v, want [1 2]", got)
	}
	if off, ok := trim(s); !ok || off != 5 {
		t.Fatalf("trim below %d (%v), want 5: segment 1 was made at checkpoint 5", off, ok)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	be = openBolt(t, dir)
	defer be.Close()
	s = openSegStore(t, be)
	if off, ok := trim(s); !ok || off != 5 {
		t.Fatalf("reopened: trim below %d (%v), want 5", off, ok)
	}
	s.put(t, "c", "5", 300*sec) // segment 5 at checkpoint 20; segments 1 and 2 expire
	flush(s, 23)
	if off, ok := trim(s); !ok || off != 20 {
		t.Fatalf("trim below %d (%v), want 20", off, ok)
	}
	if err := s.seg.Wipe("w"); err != nil {
		t.Fatal(err)
	}
	if off, ok := trim(s); ok {
		t.Fatalf("wiped: trim below %d, want nothing", off)
	}
}
