package kvstore

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRestoreBatchMatchesModel checks RestoreBatch's sort (an integer prefix, then
// bytes, then log position) against a plain model on keys that stress the prefix:
// shorter and longer than 8 bytes, zero bytes (which the padding also uses), 0xff,
// and keys that are prefixes of others.
func TestRestoreBatchMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []byte{0x00, 0x01, 'a', 0x7f, 0x80, 0xff}
	for round := range 200 {
		n := rng.IntN(300)
		records := make([]Entry, n)
		for i := range records {
			key := make([]byte, rng.IntN(12))
			for j := range key {
				key[j] = alphabet[rng.IntN(len(alphabet))]
			}
			var value []byte
			if rng.IntN(5) > 0 {
				value = []byte{byte(i), byte(i >> 8)}
			}
			records[i] = Entry{Key: key, Value: value}
		}
		last := map[string][]byte{}
		for _, e := range records {
			last[string(e.Key)] = e.Value
		}
		keys := make([]string, 0, len(last))
		for k := range last {
			keys = append(keys, k)
		}
		slices.Sort(keys)

		got := RestoreBatch("s", records, int64(n)).Writes["s"]
		if len(got) != len(keys) {
			t.Fatalf("round %d: %d entries, want %d", round, len(got), len(keys))
		}
		for i, e := range got {
			if string(e.Key) != keys[i] || !bytes.Equal(e.Value, last[keys[i]]) || (e.Value == nil) != (last[keys[i]] == nil) {
				t.Fatalf("round %d: entry %d = %q→%v, want %q→%v", round, i, e.Key, e.Value, keys[i], last[keys[i]])
			}
		}
	}
}

func TestKeyPrefixOrdersLikeBytes(t *testing.T) {
	keys := [][]byte{nil, {0}, {0, 0}, {0, 1}, {1}, []byte("abcdefgh"), []byte("abcdefgh\x00"), []byte("abcdefgi"), {0xff}, bytes.Repeat([]byte{0xff}, 9)}
	for _, a := range keys {
		for _, b := range keys {
			if keyPrefix(a) < keyPrefix(b) && bytes.Compare(a, b) >= 0 {
				t.Errorf("keyPrefix(%q) < keyPrefix(%q) but the bytes do not order so", a, b)
			}
		}
	}
}
