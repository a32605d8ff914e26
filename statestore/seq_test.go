package statestore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// seqPairs collects a sequence as "k=v" strings, stopping after limit pairs (0: all).
func seqPairs[V any](seq func(yield func(string, V) bool), limit int) []string {
	var out []string
	for k, v := range seq {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
		if len(out) == limit {
			break
		}
	}
	return out
}

// newStore registers one logged store in a fresh set over a memory backend.
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

// commit flushes the set's writes to its backend, as the runtime does after a committed
// transaction (the changelog records are not needed here).
func commit(t *testing.T, set *kvstore.Set) {
	t.Helper()
	if err := set.LogChanges(discardChanges{}); err != nil {
		t.Fatal(err)
	}
	if err := set.Flush(nil); err != nil {
		t.Fatal(err)
	}
}

type discardChanges struct{}

func (discardChanges) WriteChange(string, []byte, []byte) error { return nil }

// All, Range and Prefix yield what the store's iterators do, committed and buffered
// writes merged, and a sequence can be ranged again.
func TestSeqOfStore(t *testing.T) {
	set, s := newStore(t, serde.String(), serde.Int64())
	for i, k := range []string{"a", "ab", "abc", "b", "c"} {
		if err := s.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, set)
	if err := s.Put("aa", 9); err != nil { // buffered only
		t.Fatal(err)
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	all, allErr := statestore.All(s)
	for _, c := range []struct {
		name  string
		seq   func(yield func(string, int64) bool)
		err   func() error
		limit int
		want  string
	}{
		{"all", all, allErr, 0, "a=0 aa=9 ab=1 abc=2 c=4"},
		{"all again", all, allErr, 0, "a=0 aa=9 ab=1 abc=2 c=4"},
		{"all, break after 2", all, allErr, 2, "a=0 aa=9"},
		{"range", must2(statestore.Range(s, "aa", "b")), nil, 0, "aa=9 ab=1 abc=2"},
		{"prefix", must2(statestore.Prefix(s, "ab")), nil, 0, "ab=1 abc=2"},
		{"empty prefix", must2(statestore.Prefix(s, "x")), nil, 0, ""},
	} {
		got := strings.Join(seqPairs(c.seq, c.limit), " ")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if c.err != nil && c.err() != nil {
			t.Errorf("%s: %v", c.name, c.err())
		}
	}
}

// must2 drops the error function of a sequence whose errors the test does not expect.
func must2(seq func(yield func(string, int64) bool), _ func() error) func(yield func(string, int64) bool) {
	return seq
}

// A value that does not deserialize ends the loop and is the error; the next full
// range of the same sequence, once the value is fixed, clears it.
func TestSeqDeserializeError(t *testing.T) {
	set, raw := newStore(t, serde.String(), serde.Bytes())
	for _, k := range []string{"a", "b", "c"} {
		if err := raw.Put(k, []byte("12345678")); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Put("b", []byte("bad")); err != nil {
		t.Fatal(err)
	}
	commit(t, set)
	typed := kvstore.NewKeyValueStore(set.Buffer("s"), "app-s-changelog", serde.String(), serde.Int64(), nil)
	seq, seqErr := statestore.All(typed)
	if got := seqPairs(seq, 0); len(got) != 1 || !strings.HasPrefix(got[0], "a=") {
		t.Errorf("pairs before the bad value: %v", got)
	}
	var se *statestore.StoreError
	if err := seqErr(); !errors.As(err, &se) || !strings.Contains(err.Error(), "deserialize value") {
		t.Errorf("error: %v", err)
	}
	if err := raw.Put("b", []byte("87654321")); err != nil {
		t.Fatal(err)
	}
	if got := seqPairs(seq, 0); len(got) != 3 || seqErr() != nil {
		t.Errorf("after the fix: %v, %v", got, seqErr())
	}
}

// fakeIterator yields n pairs, then fails with err (nil: ends cleanly); Close returns
// closeErr and counts its calls.
type fakeIterator struct {
	n, pos   int
	err      error
	closeErr error
	closed   int
}

func (f *fakeIterator) Next() bool {
	if f.closed > 0 {
		panic("Next after Close")
	}
	if f.pos == f.n {
		return false
	}
	f.pos++
	return true
}
func (f *fakeIterator) Key() string  { return fmt.Sprint("k", f.pos) }
func (f *fakeIterator) Value() int64 { return int64(f.pos) }
func (f *fakeIterator) Err() error {
	if f.pos == f.n {
		return f.err
	}
	return nil
}
func (f *fakeIterator) Close() error { f.closed++; return f.closeErr }

// Seq closes the iterator exactly once however the loop ends, and reports the
// iterator's, the opening's and the closing's errors.
func TestSeqClosesTheIterator(t *testing.T) {
	errIter, errClose, errOpen := errors.New("iteration failed"), errors.New("close failed"), errors.New("open failed")
	for _, c := range []struct {
		name      string
		it        *fakeIterator
		limit     int
		panics    bool
		wantPairs int
		wantErr   []error
	}{
		{name: "to the end", it: &fakeIterator{n: 3}, wantPairs: 3},
		{name: "break", it: &fakeIterator{n: 3}, limit: 1, wantPairs: 1},
		{name: "break before the failure", it: &fakeIterator{n: 3, err: errIter}, limit: 2, wantPairs: 2},
		{name: "iteration error", it: &fakeIterator{n: 2, err: errIter}, wantPairs: 2, wantErr: []error{errIter}},
		{name: "close error", it: &fakeIterator{n: 2, closeErr: errClose}, wantPairs: 2, wantErr: []error{errClose}},
		{name: "both", it: &fakeIterator{n: 1, err: errIter, closeErr: errClose}, wantPairs: 1, wantErr: []error{errIter, errClose}},
		{name: "panic in the loop", it: &fakeIterator{n: 3}, panics: true, wantPairs: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			opened := 0
			seq, seqErr := statestore.Seq(func() (statestore.Iterator[string, int64], error) {
				opened++
				return c.it, nil
			})
			if opened != 0 || seqErr() != nil {
				t.Fatalf("before ranging: opened %d times, error %v", opened, seqErr())
			}
			n := 0
			func() {
				defer func() {
					if r := recover(); (r != nil) != c.panics {
						t.Errorf("recovered %v", r)
					}
				}()
				for range seq {
					n++
					if c.panics {
						panic("body")
					}
					if n == c.limit {
						break
					}
				}
			}()
			if n != c.wantPairs || opened != 1 || c.it.closed != 1 {
				t.Errorf("%d pairs (want %d), opened %d times, closed %d times", n, c.wantPairs, opened, c.it.closed)
			}
			err := seqErr()
			if (err == nil) != (len(c.wantErr) == 0) {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			for _, w := range c.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
		})
	}
	t.Run("open error", func(t *testing.T) {
		seq, seqErr := statestore.Seq(func() (statestore.Iterator[string, int64], error) { return nil, errOpen })
		if got := seqPairs(seq, 0); len(got) != 0 || !errors.Is(seqErr(), errOpen) {
			t.Errorf("%v, %v", got, seqErr())
		}
	})
	t.Run("each range opens its own", func(t *testing.T) {
		var its []*fakeIterator
		seq, seqErr := statestore.Seq(func() (statestore.Iterator[string, int64], error) {
			it := &fakeIterator{n: 2}
			if len(its) == 0 {
				it.err = errIter
			}
			its = append(its, it)
			return it, nil
		})
		first := seqPairs(seq, 0)
		if !errors.Is(seqErr(), errIter) {
			t.Errorf("first range: %v", seqErr())
		}
		// The second range breaks off: the first range's error is gone.
		if second := seqPairs(seq, 1); !slices.Equal(first, []string{"k1=1", "k2=2"}) || !slices.Equal(second, []string{"k1=1"}) {
			t.Errorf("ranges: %v, %v", first, second)
		}
		if seqErr() != nil {
			t.Errorf("second range: %v", seqErr())
		}
		if len(its) != 2 || its[0].closed != 1 || its[1].closed != 1 {
			t.Errorf("%d iterators", len(its))
		}
	})
}

// Over bbolt, whose iterator reads in chunks (16 keys first): a loop that breaks off
// mid-chunk leaves nothing open that would block the next commit.
func TestSeqOfBoltStore(t *testing.T) {
	backend, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := kvstore.NewSet(backend)
	t.Cleanup(func() { _ = set.Close() })
	buf, err := set.Register("s", true)
	if err != nil {
		t.Fatal(err)
	}
	s := kvstore.NewKeyValueStore(buf, "app-s-changelog", serde.String(), serde.Int64(), nil)
	var want []string
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		if err := s.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s=%d", k, i))
	}
	commit(t, set)
	seq, seqErr := statestore.All(s)
	if got := seqPairs(seq, 0); !slices.Equal(got, want) || seqErr() != nil {
		t.Fatalf("all: %v, %v", got, seqErr())
	}
	if got := seqPairs(seq, 20); !slices.Equal(got, want[:20]) || seqErr() != nil {
		t.Fatalf("first 20: %v, %v", got, seqErr())
	}
	if err := s.Put("k15", 100); err != nil {
		t.Fatal(err)
	}
	commit(t, set)
	prefix, prefixErr := statestore.Prefix(s, "k1")
	got := strings.Join(seqPairs(prefix, 0), " ")
	if got != "k10=10 k11=11 k12=12 k13=13 k14=14 k15=100 k16=16 k17=17 k18=18 k19=19" || prefixErr() != nil {
		t.Errorf("prefix k1: %s, %v", got, prefixErr())
	}
}

// A range loop over a store: the iterator is closed when the loop ends or breaks.
func ExampleAll() {
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	defer set.Close()
	buf, err := set.Register("prices", false)
	if err != nil {
		fmt.Println(err)
		return
	}
	prices := kvstore.NewKeyValueStore(buf, "app-prices-changelog", serde.String(), serde.Int64(), nil)
	_ = prices.Put("bread", 250)
	_ = prices.Put("apple", 120)
	_ = prices.Put("cheese", 700)

	all, iterErr := statestore.All(prices)
	for name, cents := range all {
		if cents > 500 {
			break
		}
		fmt.Println(name, cents)
	}
	if err := iterErr(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// apple 120
	// bread 250
}
