//go:build unix

package eos

import (
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/internal/partition"
)

// pgFixture is a small input and the PostgreSQL tables a correct run leaves: every
// update appended (two-phase, pipe), each key's final aggregate (upsert), each closed
// window's final result.
func pgFixture() *Observed {
	const parts = 2
	o := &Observed{
		Partitions: parts, Input: map[int32][]InRecord{},
		OutputPartitions: map[string]int32{StoreSum: parts, StoreCount: parts, StoreMax: parts},
		Windows:          WindowParams{SizeMs: 1000, GraceMs: 100},
	}
	for i := range 40 {
		key := fmt.Sprintf("k%d", i%5)
		p := partition.ForKey([]byte(key), parts)
		o.Input[p] = append(o.Input[p], InRecord{Offset: int64(len(o.Input[p])), Key: key, Value: int64(1000 + i*7), Timestamp: int64(i * 150)})
	}
	r := &Report{}
	e := expect(o, r)
	we := expectWindows(o, r)
	pg := &PGObserved{Updates: map[string]map[string]map[int32][]OutRecord{}, Finals: map[string]map[int32][]WinRecord{}}
	for _, mode := range PGModes() {
		pg.Updates[mode] = map[string]map[int32][]OutRecord{}
		for _, store := range []string{StoreSum, StoreCount, StoreMax} {
			m := map[int32][]OutRecord{}
			last := map[string]int{}
			for _, p := range sortedPartitions(o.Input) {
				for _, in := range o.Input[p] {
					rec := OutRecord{Offset: in.Offset, Key: in.Key, Input: in.Value, Value: e.after[store][in.Value]}
					if i, ok := last[in.Key]; ok && mode == PGUpsert {
						m[p][i] = rec
						continue
					}
					last[in.Key] = len(m[p])
					m[p] = append(m[p], rec)
				}
			}
			pg.Updates[mode][store] = m
		}
		fin := map[int32][]WinRecord{}
		for _, k := range sortedWindows(we.windows) {
			p := we.part[k]
			if k.start+o.Windows.SizeMs+o.Windows.GraceMs > we.closedBy[p] {
				continue
			}
			var sure []winMember
			for _, m := range we.windows[k] {
				if m.class == onTime {
					sure = append(sure, m)
				}
			}
			if len(sure) == 0 {
				continue
			}
			res := aggregate(sure, nil, 0)
			fin[p] = append(fin[p], WinRecord{Key: k.key, Start: k.start, Agg: res.agg, Timestamp: res.ts})
		}
		pg.Finals[mode] = fin
	}
	o.Postgres = pg
	return o
}

func checkPG(o *Observed) *Report {
	r := &Report{}
	e := expect(o, r)
	we := expectWindows(o, r)
	checkPostgres(o, e, we, r)
	return r
}

// The verifier's check of the PostgreSQL target finds a duplicated row, a lost one, a
// wrong value, a lost key, a repeated final result and a prepared transaction left
// behind, each in the table of the mode where it was doctored; the correct tables pass.
func TestCheckPostgresFindsDoctoredTables(t *testing.T) {
	if r := checkPG(pgFixture()); !r.OK() || r.PGRows == 0 {
		t.Fatalf("the correct tables: %+v, problems %q", r, r.Problems)
	}
	first := func(m map[int32][]OutRecord) int32 { return sortedPartitions(m)[0] }
	for _, c := range []struct {
		name   string
		doctor func(pg *PGObserved)
		check  func(r *Report) bool
	}{
		{"2pc row twice", func(pg *PGObserved) {
			m := pg.Updates[PGTwoPhase][StoreSum]
			p := first(m)
			m[p] = append(m[p][:3], m[p][2:]...)
		}, func(r *Report) bool { return r.Duplicates == 1 }},
		{"pipe row dropped", func(pg *PGObserved) {
			m := pg.Updates[PGPipe][StoreCount]
			p := first(m)
			m[p] = append(m[p][:1], m[p][2:]...)
		}, func(r *Report) bool { return r.Lost == 1 }},
		{"2pc row with a wrong value", func(pg *PGObserved) {
			m := pg.Updates[PGTwoPhase][StoreMax]
			m[first(m)][4].Value++
		}, func(r *Report) bool { return r.Mismatched == 1 }},
		{"upsert row behind", func(pg *PGObserved) {
			m := pg.Updates[PGUpsert][StoreSum]
			m[first(m)][0].Value -= 7
		}, func(r *Report) bool { return r.Mismatched == 1 }},
		{"upsert key lost", func(pg *PGObserved) {
			m := pg.Updates[PGUpsert][StoreCount]
			p := first(m)
			m[p] = m[p][1:]
		}, func(r *Report) bool { return r.Lost == 1 }},
		{"final result twice", func(pg *PGObserved) {
			for p, f := range pg.Finals[PGPipe] {
				pg.Finals[PGPipe][p] = append(f, f[0])
				return
			}
		}, func(r *Report) bool { return r.Duplicates == 1 }},
		{"final result lost", func(pg *PGObserved) {
			for p, f := range pg.Finals[PGUpsert] {
				pg.Finals[PGUpsert][p] = f[1:]
				return
			}
		}, func(r *Report) bool { return r.Lost == 1 }},
		{"prepared transaction left", func(pg *PGObserved) {
			pg.Prepared = []string{"eddy:app:0_1:pg-2pc-updates:0000000000000009"}
		}, func(r *Report) bool { return r.PGPrepared == 1 }},
	} {
		o := pgFixture()
		c.doctor(o.Postgres)
		r := checkPG(o)
		if r.OK() || !c.check(r) {
			t.Errorf("%s: duplicates=%d lost=%d mismatched=%d prepared=%d, problems %q", c.name, r.Duplicates, r.Lost, r.Mismatched, r.PGPrepared, r.Problems)
		}
	}
}
