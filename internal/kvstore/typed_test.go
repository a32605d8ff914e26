package kvstore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// newStore registers one logged store in a fresh Set over a memory backend.
func newStore[K, V any](t *testing.T, keys serde.Serde[K], values serde.Serde[V]) (*kvstore.Set, statestore.KeyValueStore[K, V]) {
	t.Helper()
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	t.Cleanup(func() { _ = set.Close() })
	buf, err := set.Register("s", true)
	if err != nil {
		t.Fatal(err)
	}
	return set, kvstore.NewKeyValueStore(buf, "app-s-changelog", keys, values, nil)
}

// recorder is a ChangelogWriter that keeps what it is given.
type recorder struct{ changes []string }

func (r *recorder) WriteChange(store string, key, value []byte) error {
	v := "<nil>"
	if value != nil {
		v = string(value)
	}
	r.changes = append(r.changes, fmt.Sprintf("%s:%s=%s", store, key, v))
	return nil
}

// commit logs the changes and flushes them, as the runtime does around a committed
// transaction, and returns the changelog records.
func commit(t *testing.T, set *kvstore.Set) []string {
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

func get[K, V any](t *testing.T, s statestore.KeyValueStore[K, V], k K) (V, bool) {
	t.Helper()
	v, ok, err := s.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// pairs renders an iterator's content as "k=v" strings and closes it.
func pairs[K, V any](t *testing.T, it statestore.Iterator[K, V], err error) []string {
	t.Helper()
	kvs, err := statestore.Collect(it, err)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, kv := range kvs {
		out = append(out, fmt.Sprintf("%v=%v", kv.Key, kv.Value))
	}
	return out
}

func count[K, V any](t *testing.T, s statestore.KeyValueStore[K, V]) int64 {
	t.Helper()
	n, err := s.ApproximateCount()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGetPutDelete(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.Int64())
	if s.Name() != "s" {
		t.Errorf("Name = %q", s.Name())
	}
	if _, ok := get(t, s, "a"); ok {
		t.Fatal("empty store has a")
	}
	if err := s.Put("a", 1); err != nil {
		t.Fatal(err)
	}
	// Read-your-writes before any commit.
	if v, ok := get(t, s, "a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v before commit", v, ok)
	}
	commit(t, set)
	if v, ok := get(t, s, "a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v after commit", v, ok)
	}
	if err := s.Put("a", 2); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, s, "a"); v != 2 {
		t.Fatalf("buffered overwrite not read: %v", v)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, s, "a"); ok {
		t.Fatal("buffered delete not read")
	}
	if err := s.Delete("never-there"); err != nil {
		t.Fatalf("Delete of an absent key: %v", err)
	}
	commit(t, set)
	if _, ok := get(t, s, "a"); ok {
		t.Fatal("delete lost at commit")
	}
}

// An empty value is a value, not a delete; a value serializing to nil is a delete.
func TestEmptyValueIsNotATombstone(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.String())
	if err := s.Put("k", ""); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, s, "k"); !ok || v != "" {
		t.Fatalf("Get = %q, %v", v, ok)
	}
	if got := commit(t, set); !slices.Equal(got, []string{"s:k="}) {
		t.Fatalf("changelog = %q, want an empty value, not a tombstone", got)
	}
	if v, ok := get(t, s, "k"); !ok || v != "" {
		t.Fatalf("after commit Get = %q, %v", v, ok)
	}

	set2, ns := newStore(t, serde.String(), serde.Nullable(serde.String()))
	x := "x"
	if err := ns.Put("k", &x); err != nil {
		t.Fatal(err)
	}
	commit(t, set2)
	if err := ns.Put("k", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, ns, "k"); ok {
		t.Fatal("Put of a nil value should delete")
	}
	if got := commit(t, set2); !slices.Equal(got, []string{"s:k=<nil>"}) {
		t.Fatalf("changelog = %q, want a tombstone", got)
	}
}

func TestPutIfAbsent(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.Int64())
	old, existed, err := s.PutIfAbsent("a", 1)
	if err != nil || existed || old != 0 {
		t.Fatalf("first PutIfAbsent = %v, %v, %v", old, existed, err)
	}
	old, existed, err = s.PutIfAbsent("a", 2)
	if err != nil || !existed || old != 1 {
		t.Fatalf("second PutIfAbsent (buffered) = %v, %v, %v; want 1, true", old, existed, err)
	}
	commit(t, set)
	old, existed, err = s.PutIfAbsent("a", 3)
	if err != nil || !existed || old != 1 {
		t.Fatalf("PutIfAbsent over the backend = %v, %v, %v; want 1, true", old, existed, err)
	}
	if v, _ := get(t, s, "a"); v != 1 {
		t.Fatalf("PutIfAbsent overwrote: %v", v)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if _, existed, _ := s.PutIfAbsent("a", 4); existed {
		t.Fatal("a deleted key counts as absent")
	}
	if v, _ := get(t, s, "a"); v != 4 {
		t.Fatalf("Get = %v, want 4", v)
	}
}

// Scans merge the write buffer over the backend: buffered values replace committed ones,
// buffered deletes hide them, new keys appear in order.
func TestRangePrefixAllMergeBufferOverBackend(t *testing.T) {
	scan := func(it statestore.Iterator[string, string], err error) []string { return pairs(t, it, err) }
	set, s := newStore(t, serde.String(), serde.String())
	for _, k := range []string{"apple", "apricot", "banana", "blueberry", "cherry", "date"} {
		if err := s.Put(k, "old-"+k); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, set)
	// Buffered: overwrite, delete, insert, and delete-then-reinsert.
	must(t, s.Put("banana", "new"))
	must(t, s.Delete("apricot"))
	must(t, s.Put("avocado", "new"))
	must(t, s.Put("aardvark", "new"))
	must(t, s.Delete("date"))
	must(t, s.Put("date", "again"))
	must(t, s.Delete("zucchini")) // delete of a key the backend lacks

	want := []string{"aardvark=new", "apple=old-apple", "avocado=new", "banana=new", "blueberry=old-blueberry", "cherry=old-cherry", "date=again"}
	if got := scan(s.All()); !slices.Equal(got, want) {
		t.Errorf("All = %q\nwant %q", got, want)
	}
	if got := scan(s.Range("apple", "blueberry")); !slices.Equal(got, want[1:4]) {
		t.Errorf("Range[apple, blueberry) = %q, want %q", got, want[1:4])
	}
	if got := scan(s.Range("b", "c")); !slices.Equal(got, want[3:5]) {
		t.Errorf("Range[b, c) = %q", got)
	}
	if got := scan(s.Range("c", "b")); len(got) != 0 {
		t.Errorf("Range with from > to = %q, want nothing", got)
	}
	if got := scan(s.Range("", "b")); !slices.Equal(got, want[:3]) {
		t.Errorf("Range[\"\", b) = %q; the empty key is the smallest", got)
	}
	if got := scan(s.Prefix("a")); !slices.Equal(got, want[:3]) {
		t.Errorf("Prefix(a) = %q", got)
	}
	if got := scan(s.Prefix("ap")); !slices.Equal(got, want[1:2]) {
		t.Errorf("Prefix(ap) = %q", got)
	}
	if got := scan(s.Prefix("")); !slices.Equal(got, want) {
		t.Errorf("Prefix(\"\") = %q, want everything", got)
	}
	if got := scan(s.Prefix("x")); len(got) != 0 {
		t.Errorf("Prefix(x) = %q", got)
	}
	if n := count(t, s); n != int64(len(want)) {
		t.Errorf("ApproximateCount = %d, want %d", n, len(want))
	}

	// After the commit the backend alone gives the same answers.
	commit(t, set)
	if got := scan(s.All()); !slices.Equal(got, want) {
		t.Errorf("All after commit = %q", got)
	}
	if n := count(t, s); n != int64(len(want)) {
		t.Errorf("ApproximateCount after commit = %d", n)
	}
}

// Prefix scans of keys ending in 0xff bytes need the carry in prefixEnd.
func TestPrefixWithHighBytes(t *testing.T) {
	set, s := newStore(t, serde.Bytes(), serde.String())
	keys := [][]byte{{0x01}, {0x01, 0xff}, {0x01, 0xff, 0x00}, {0x01, 0xff, 0xff}, {0x02}, {0xff}, {0xff, 0xff}, {0xff, 0xff, 0x01}}
	for _, k := range keys {
		must(t, s.Put(k, fmt.Sprintf("%x", k)))
	}
	for round := range 2 { // buffered, then committed
		for _, c := range []struct {
			prefix []byte
			want   []string
		}{
			{[]byte{0x01, 0xff}, []string{"01ff", "01ff00", "01ffff"}},
			{[]byte{0xff}, []string{"ff", "ffff", "ffff01"}},
			{[]byte{0xff, 0xff}, []string{"ffff", "ffff01"}},
			{[]byte{0x01}, []string{"01", "01ff", "01ff00", "01ffff"}},
		} {
			kvs, err := statestore.Collect(s.Prefix(c.prefix))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, kv := range kvs {
				got = append(got, kv.Value)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("round %d: Prefix(%x) = %q, want %q", round, c.prefix, got, c.want)
			}
		}
		commit(t, set)
	}
}

func TestApproximateCount(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.Int64())
	if n := count(t, s); n != 0 {
		t.Fatalf("empty count = %d", n)
	}
	must(t, s.Put("a", 1))
	must(t, s.Put("b", 1))
	must(t, s.Put("a", 2)) // the same key twice counts once
	if n := count(t, s); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	commit(t, set)
	must(t, s.Delete("a"))
	must(t, s.Put("b", 3)) // overwrite of a committed key: no change
	must(t, s.Put("c", 1))
	must(t, s.Delete("nope"))
	if n := count(t, s); n != 2 {
		t.Fatalf("count = %d, want 2 (b, c)", n)
	}
}

func TestLogChangesFlushDiscard(t *testing.T) {
	scan := func(it statestore.Iterator[string, string], err error) []string { return pairs(t, it, err) }
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	defer set.Close()
	bufB, _ := set.Register("b-store", true)
	bufA, _ := set.Register("a-store", true)
	bufL, _ := set.Register("local", false)
	a := kvstore.NewKeyValueStore(bufA, "t", serde.String(), serde.String(), nil)
	b := kvstore.NewKeyValueStore(bufB, "t", serde.String(), serde.String(), nil)
	l := kvstore.NewKeyValueStore(bufL, "t", serde.String(), serde.String(), nil)
	if _, err := set.Register("a-store", true); err == nil || !strings.Contains(err.Error(), "a-store") {
		t.Fatalf("second Register of a-store = %v", err)
	}
	if !slices.Equal(set.Names(), []string{"a-store", "b-store", "local"}) {
		t.Errorf("Names = %q", set.Names())
	}

	must(t, b.Put("y", "1"))
	must(t, a.Put("x", "1"))
	must(t, a.Put("x", "2")) // last write wins: one record per key
	must(t, a.Put("w", "1"))
	must(t, a.Delete("w"))
	must(t, l.Put("z", "1"))
	if set.Dirty() != 4 {
		t.Errorf("Dirty = %d, want 4", set.Dirty())
	}

	var r recorder
	must(t, set.LogChanges(&r))
	// Store-name then key order; no record for the unlogged store; a delete is a tombstone.
	want := []string{"a-store:w=<nil>", "a-store:x=2", "b-store:y=1"}
	if !slices.Equal(r.changes, want) {
		t.Fatalf("changelog = %q, want %q", r.changes, want)
	}
	// LogChanges leaves the buffer: if the transaction aborts, Discard drops it.
	if set.Dirty() != 4 {
		t.Fatalf("LogChanges cleared the buffer")
	}
	set.Discard()
	if set.Dirty() != 0 {
		t.Fatalf("Discard left %d dirty keys", set.Dirty())
	}
	for _, s := range []statestore.KeyValueStore[string, string]{a, b, l} {
		if got := scan(s.All()); len(got) != 0 {
			t.Errorf("%s after Discard = %q, want nothing", s.Name(), got)
		}
	}

	// Commit for real, with checkpoints.
	must(t, a.Put("x", "3"))
	must(t, l.Put("z", "2"))
	r = recorder{}
	must(t, set.LogChanges(&r))
	must(t, set.Flush(map[string]int64{"a-store": 42}))
	if set.Dirty() != 0 {
		t.Fatalf("Flush left %d dirty keys", set.Dirty())
	}
	if v, ok := get(t, a, "x"); !ok || v != "3" {
		t.Fatalf("a.x = %q, %v", v, ok)
	}
	if v, ok := get(t, l, "z"); !ok || v != "2" {
		t.Fatalf("local.z = %q, %v: unlogged stores are flushed too", v, ok)
	}
	off, ok, err := set.Backend().Checkpoint("a-store")
	if err != nil || !ok || off != 42 {
		t.Fatalf("Checkpoint(a-store) = %d, %v, %v", off, ok, err)
	}
	if _, ok, _ := set.Backend().Checkpoint("b-store"); ok {
		t.Fatal("b-store got a checkpoint it was not given")
	}
	// The committed state survives a Discard.
	must(t, a.Put("x", "4"))
	set.Discard()
	if v, _ := get(t, a, "x"); v != "3" {
		t.Fatalf("a.x after Discard = %q, want the committed 3", v)
	}
}

type failingWriter struct{}

func (failingWriter) WriteChange(string, []byte, []byte) error { return errors.New("producer gone") }

func TestLogChangesErrorNamesStore(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.String())
	must(t, s.Put("k", "v"))
	err := set.LogChanges(failingWriter{})
	var se *statestore.StoreError
	if !errors.As(err, &se) || se.Store != "s" || !strings.Contains(err.Error(), "producer gone") {
		t.Fatalf("LogChanges error = %v; want a StoreError naming store s", err)
	}
}

// Values handed out must not alias the buffer: changing them must not change the store.
func TestReturnedBytesDoNotAliasTheStore(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.Bytes())
	must(t, s.Put("k", []byte("value")))
	check := func(when string) {
		t.Helper()
		v, _ := get(t, s, "k")
		v[0] = 'X'
		it, err := s.All()
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			it.Value()[0] = 'Y'
		}
		must(t, it.Close())
		if v, _ := get(t, s, "k"); string(v) != "value" {
			t.Fatalf("%s: stored value changed to %q through a returned slice", when, v)
		}
	}
	check("buffered")
	commit(t, set)
	check("committed")
	in := []byte("input")
	must(t, s.Put("k2", in))
	in[0] = 'Z'
	if v, _ := get(t, s, "k2"); string(v) != "input" {
		t.Fatalf("Put kept the caller's slice: %q", v)
	}
}

// Keys stored with one serde and read with another fail to deserialize, naming the store.
func TestDeserializeErrorNamesStore(t *testing.T) {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	defer set.Close()
	buf, _ := set.Register("numbers", true)
	raw := kvstore.NewKeyValueStore(buf, "t", serde.String(), serde.String(), nil)
	typed := kvstore.NewKeyValueStore(buf, "t", serde.String(), serde.Int64(), nil)
	must(t, raw.Put("k", "abc"))
	_, _, err := typed.Get("k")
	var se *statestore.StoreError
	var serr *serde.Error
	if !errors.As(err, &se) || se.Store != "numbers" || !errors.As(err, &serr) || serr.Serde != "Int64" {
		t.Fatalf("Get = %v; want a StoreError of numbers wrapping an Int64 serde error", err)
	}
	it, err := typed.All()
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() {
		t.Fatal("Next succeeded on an undeserializable value")
	}
	if !errors.As(it.Err(), &se) || se.Store != "numbers" {
		t.Fatalf("iterator Err = %v", it.Err())
	}
	must(t, it.Close())
}

type opRecorder struct{ ops []string }

func (m *opRecorder) ObserveOp(store, op string, d time.Duration) {
	m.ops = append(m.ops, store+":"+op)
}

func TestMetricsObserveEachOperation(t *testing.T) {
	scan := func(it statestore.Iterator[string, string], err error) []string { return pairs(t, it, err) }
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	defer set.Close()
	buf, _ := set.Register("m", true)
	rec := &opRecorder{}
	s := kvstore.NewKeyValueStore(buf, "t", serde.String(), serde.String(), rec)
	must(t, s.Put("a", "1"))
	get(t, s, "a")
	must(t, s.Delete("a"))
	scan(s.Range("a", "b"))
	scan(s.Prefix("a"))
	scan(s.All())
	want := []string{"m:put", "m:get", "m:delete", "m:range", "m:range", "m:range"}
	if !slices.Equal(rec.ops, want) {
		t.Fatalf("observed %q, want %q", rec.ops, want)
	}
}

// In-memory stores of a task may live in a second backend; Flush writes both, Close
// closes each once.
func TestRegisterInSecondBackend(t *testing.T) {
	main, mem := &countingBackend{Backend: kvstore.NewMemoryBackend()}, &countingBackend{Backend: kvstore.NewMemoryBackend()}
	set := kvstore.NewSet(main)
	bufA, _ := set.Register("a", true)
	bufB, _ := set.RegisterIn("b", true, mem)
	bufC, _ := set.RegisterIn("c", false, mem)
	for _, buf := range []*kvstore.Buffer{bufA, bufB, bufC} {
		must(t, kvstore.NewKeyValueStore(buf, "t", serde.String(), serde.String(), nil).Put("k", buf.Name()))
	}
	must(t, set.Flush(map[string]int64{"a": 1, "b": 2}))
	if main.writes != 1 || mem.writes != 1 {
		t.Fatalf("writes: main %d, mem %d; want one atomic write each", main.writes, mem.writes)
	}
	if v, _ := mem.Get("c", []byte("k")); string(v) != "c" {
		t.Fatalf("store c not in its backend: %q", v)
	}
	if v, _ := main.Get("b", []byte("k")); v != nil {
		t.Fatalf("store b leaked into the main backend: %q", v)
	}
	if off, ok, _ := mem.Checkpoint("b"); !ok || off != 2 {
		t.Fatalf("checkpoint of b = %d, %v", off, ok)
	}
	must(t, set.Close())
	if main.closes != 1 || mem.closes != 1 {
		t.Fatalf("closes: main %d, mem %d; want 1 each", main.closes, mem.closes)
	}
	must(t, set.Close()) // idempotent
	if err := set.Flush(nil); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}
}

type countingBackend struct {
	kvstore.Backend
	writes, closes int
}

func (c *countingBackend) Write(b kvstore.Batch) error { c.writes++; return c.Backend.Write(b) }
func (c *countingBackend) Close() error                { c.closes++; return c.Backend.Close() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// printChanges is a ChangelogWriter that prints each changelog record.
type printChanges struct{}

func (printChanges) WriteChange(store string, key, value []byte) error {
	fmt.Printf("changelog %s: %s = %q\n", store, key, value)
	return nil
}

// A store's writes wait in its write buffer: LogChanges turns them into changelog
// records inside the task's Kafka transaction, Flush writes them to the backend once the
// transaction committed, Discard drops them if it aborted.
func ExampleSet() {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	defer set.Close()
	buf, _ := set.Register("counts", true)
	counts := kvstore.NewKeyValueStore(buf, "app-counts-changelog", serde.String(), serde.Int64(), nil)

	_ = counts.Put("kafka", 1)
	_ = counts.Put("kafka", 2) // last write wins: one changelog record per key
	_ = counts.Put("eddy", 1)
	n, _, _ := counts.Get("kafka") // reads see the buffer
	fmt.Println("kafka:", n)

	_ = set.LogChanges(printChanges{})              // before CommitTxn
	_ = set.Flush(map[string]int64{"counts": 2})    // after CommitTxn: data + checkpoint
	off, _, _ := set.Backend().Checkpoint("counts") // the changelog offset to restore from
	fmt.Println("checkpoint:", off)

	_ = counts.Put("kafka", 100)
	set.Discard() // the transaction aborted
	n, _, _ = counts.Get("kafka")
	fmt.Println("kafka:", n)
	// Output:
	// kafka: 2
	// changelog counts: eddy = "\x00\x00\x00\x00\x00\x00\x00\x01"
	// changelog counts: kafka = "\x00\x00\x00\x00\x00\x00\x00\x02"
	// checkpoint: 2
	// kafka: 2
}

func TestOversizedKeyRefused(t *testing.T) {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	buf, err := set.Register("s", true)
	if err != nil {
		t.Fatal(err)
	}
	kv := kvstore.NewKeyValueStore(buf, "topic", serde.String(), serde.String(), nil)
	big := strings.Repeat("k", statestore.MaxKeySize+1)
	if err := kv.Put(big, "v"); !errors.Is(err, statestore.ErrKeyTooLarge) {
		t.Fatalf("Put of a %d-byte key: %v, want statestore.ErrKeyTooLarge", len(big), err)
	}
	if set.Dirty() != 0 {
		t.Fatal("the refused key reached the write buffer")
	}
	if err := kv.Put(strings.Repeat("k", statestore.MaxKeySize), "v"); err != nil {
		t.Fatalf("a key of exactly statestore.MaxKeySize: %v", err)
	}
}

// A key that serializes to null is refused before it reaches the buffer: the
// changelog, a compacted topic, would refuse the record at commit.
func TestNullKeyRefused(t *testing.T) {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	buf, err := set.Register("s", true)
	if err != nil {
		t.Fatal(err)
	}
	kv := kvstore.NewKeyValueStore(buf, "topic", serde.Nullable(serde.String()), serde.String(), nil)
	if err := kv.Put(nil, "v"); !errors.Is(err, statestore.ErrNullKey) {
		t.Fatalf("Put of a nil key: %v, want statestore.ErrNullKey", err)
	}
	if _, _, err := kv.Get(nil); !errors.Is(err, statestore.ErrNullKey) {
		t.Fatalf("Get of a nil key: %v, want statestore.ErrNullKey", err)
	}
	if err := kv.Delete(nil); !errors.Is(err, statestore.ErrNullKey) {
		t.Fatalf("Delete of a nil key: %v, want statestore.ErrNullKey", err)
	}
	if set.Dirty() != 0 {
		t.Fatal("the null key reached the write buffer")
	}
	empty := ""
	if err := kv.Put(&empty, "v"); err != nil {
		t.Fatalf("the empty key (not null): %v", err)
	}
}

// A value serde that panics on stored bytes (restored from a changelog anyone with
// write access could have written to) gives the processor an error, not a crash.
func TestDeserializerPanicIsAnError(t *testing.T) {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	buf, err := set.Register("s", true)
	if err != nil {
		t.Fatal(err)
	}
	touchy := serde.Funcs("Touchy",
		func(_ string, v string) ([]byte, error) { return []byte(v), nil },
		func(_ string, b []byte) (string, error) {
			if string(b) == "bad" {
				var m map[string]int
				m["x"] = 1 // assignment to a nil map: a panic
			}
			return string(b), nil
		})
	kv := kvstore.NewKeyValueStore(buf, "topic", touchy, touchy, nil)
	if err := kv.Put("k", "bad"); err != nil {
		t.Fatal(err)
	}
	var se *serde.Error
	if _, _, err := kv.Get("k"); !errors.Is(err, serde.ErrPanicked) || !errors.As(err, &se) || se.Serde != "Touchy" {
		t.Fatalf("Get of a value the serde panics on: %v; want a Touchy serde.Error wrapping ErrPanicked", err)
	}
	it, err := kv.All()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.Next() || !errors.Is(it.Err(), serde.ErrPanicked) {
		t.Fatalf("iterating over it: Next, Err = %v; want ErrPanicked", it.Err())
	}
}
