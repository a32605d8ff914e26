package kvstore

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/eddy-streams/eddy/statestore"
)

// changelogRecords decodes fuzz bytes into changelog records with few distinct keys
// (0-3 bytes over a small alphabet, so keys repeat): per record a key-length byte, the
// key, a value-length byte (0xff: a tombstone), the value.
func changelogRecords(data []byte) []Entry {
	var out []Entry
	for len(data) > 0 {
		kl := int(data[0] % 4)
		data = data[1:]
		if len(data) < kl {
			break
		}
		key := make([]byte, kl)
		for i := range key {
			key[i] = 'a' + data[i]%3
		}
		data = data[kl:]
		e := Entry{Key: key}
		if len(data) > 0 {
			vl := data[0]
			data = data[1:]
			if vl != 0xff {
				n := min(int(vl%8), len(data))
				e.Value, data = bytes.Clone(data[:n]), data[n:]
				if e.Value == nil {
					e.Value = []byte{}
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// FuzzRestoreBatch: changelog records, any keys and values in any order, restored in
// two batches: the store then holds the last value of every key (a tombstone deletes
// it; an empty key and an empty value are a key and a value), in both backends, with
// the checkpoint of the last batch. A key longer than statestore.MaxKeySize fails the write in
// both, changing nothing.
func FuzzRestoreBatch(f *testing.F) {
	f.Add([]byte("\x01a\x01x\x01a\x02yy\x01b\xff\x00\x00"), uint8(1), false)
	f.Add([]byte("\x01a\x01x\x01a\xff\x01a\x01z"), uint8(2), false)
	f.Add([]byte("\x00\x00\x00\x01v"), uint8(0), true)
	// One bbolt file for all inputs (opening one per input costs more than the rest):
	// each input starts by wiping the store.
	bolt, err := OpenBolt(f.TempDir(), BoltOptions{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = bolt.Close() })
	f.Fuzz(func(t *testing.T, data []byte, split uint8, bigKey bool) {
		if err := bolt.Wipe("s"); err != nil {
			t.Fatal(err)
		}
		recs := changelogRecords(data)
		cut := 0
		if len(recs) > 0 {
			cut = int(split) % (len(recs) + 1)
		}
		first, second := recs[:cut], slices.Clone(recs[cut:])
		if bigKey {
			second = append(second, Entry{Key: bytes.Repeat([]byte{'k'}, statestore.MaxKeySize+1), Value: []byte("v")})
		}
		model := map[string][]byte{}
		apply := func(rs []Entry) {
			for _, r := range rs {
				if r.Value == nil {
					delete(model, string(r.Key))
				} else {
					model[string(r.Key)] = r.Value
				}
			}
		}
		apply(first)
		afterFirst := mapsClone(model)
		apply(second)

		for name, be := range map[string]Backend{"memory": NewMemoryBackend(), "bolt": bolt} {
			if err := be.Write(RestoreBatch("s", first, 10)); err != nil {
				t.Fatalf("%s: first batch: %v", name, err)
			}
			err := be.Write(RestoreBatch("s", second, 20))
			want, cp := model, int64(20)
			if bigKey {
				if err == nil {
					t.Fatalf("%s: a key of %d bytes was written", name, statestore.MaxKeySize+1)
				}
				if !errors.Is(err, statestore.ErrKeyTooLarge) {
					t.Fatalf("%s: a key of %d bytes: %v; want statestore.ErrKeyTooLarge", name, statestore.MaxKeySize+1, err)
				}
				want, cp = afterFirst, 10
			} else if err != nil {
				t.Fatalf("%s: second batch: %v", name, err)
			}
			checkStore(t, name, be, want, cp)
		}
	})
}

func mapsClone(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func checkStore(t *testing.T, name string, be Backend, want map[string][]byte, cp int64) {
	t.Helper()
	if off, ok, err := be.Checkpoint("s"); err != nil || !ok || off != cp {
		t.Fatalf("%s: checkpoint %d %v %v; want %d", name, off, ok, err, cp)
	}
	keys := make([]string, 0, len(want))
	for k, v := range want {
		keys = append(keys, k)
		got, err := be.Get("s", []byte(k))
		if err != nil || got == nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: Get(%q) = %q, %v; want %q", name, k, got, err, v)
		}
	}
	slices.Sort(keys)
	it, err := be.Iterate("s", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for it.Next() {
		got = append(got, string(it.Key()))
		if !bytes.Equal(it.Value(), want[string(it.Key())]) {
			t.Fatalf("%s: iterating: %q = %q; want %q", name, it.Key(), it.Value(), want[string(it.Key())])
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("%s: keys %q; want %q", name, got, keys)
	}
	if n, err := be.Count("s"); err != nil || n != int64(len(keys)) {
		t.Fatalf("%s: Count = %d, %v; want %d", name, n, err, len(keys))
	}
}
