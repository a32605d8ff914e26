package kstreams

import (
	"slices"
	"strings"
	"time"
)

// ProcessorTopologies are the processor-API topologies: P1, a word count per line in a
// store with caching that forwards when the cache flushes (doc.go). Its outputs include
// the store's changelog, compared per key in order (ByKey), not compacted: with caching
// on, both write one changelog record per key per commit, which the comparison sees.
var ProcessorTopologies = []string{"P1"}

// perKeyChangelogs are the changelogs compared with ByKey rather than CompactChangelog.
var perKeyChangelogs = map[string]bool{ChangelogTopic("P1", "pc-counts"): true}

func init() {
	Outputs["P1"] = []string{"pc-out", ChangelogTopic("P1", "pc-counts")}
}

// ByKey orders a changelog's records by key, keeping each key's records in their order,
// without timestamps: Kafka Streams writes a commit's changelog records in the order of
// the keys' latest updates (its cache's flush order), eddy in key order, and a
// compacted topic keeps only the per-key order.
func ByKey(recs []Record) []Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].Timestamp = time.Time{}
	}
	slices.SortStableFunc(out, func(a, b Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return out
}

// p1 is a line of T1's words, keyed k1-k3, or keyed "del" (one in six): its words are
// deleted from the counts. Lines repeat words (T1's pool is small), so one line makes
// several updates of a key, which the record cache merges.
func (g gen) p1() Record {
	r := g.t1()
	r.Topic = "pc-in"
	if g.rng.IntN(6) == 0 {
		r.Key = []byte("del")
	}
	return r
}
