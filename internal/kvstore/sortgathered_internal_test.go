package kvstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortGatheredRecords orders records exactly as sorting them with compareGathered does:
// keys sharing their 8-byte prefix, keys that are prefixes of others, repeated keys in
// log order.
func TestSortGatheredRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 20000} {
		recs := make([]gatheredRecord, n)
		for i := range recs {
			var key []byte
			switch rng.IntN(3) {
			case 0: // a shared 8-byte prefix, then a distinguishing tail
				key = fmt.Appendf(nil, "prefix--%d", rng.IntN(50))
			case 1: // short keys (prefix padded), some repeated
				key = fmt.Appendf(nil, "k%d", rng.IntN(100))
			default:
				key = fmt.Appendf(nil, "%016x", rng.Uint64())
			}
			recs[i] = gatheredRecord{prefix: keyPrefix(key), key: key, value: []byte{byte(i)}, pos: i}
		}
		want := slices.Clone(recs)
		slices.SortFunc(want, compareGathered)
		sortGatheredRecords(recs)
		for i := range recs {
			if compareGathered(recs[i], want[i]) != 0 {
				t.Fatalf("n=%d: record %d is %q (pos %d), want %q (pos %d)", n, i, recs[i].key, recs[i].pos, want[i].key, want[i].pos)
			}
		}
	}
}
