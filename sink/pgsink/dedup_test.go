package pgsink

import (
	"slices"
	"testing"
)

// dedup keeps each key's last row, in the batch's order; values of two types are two
// keys (as with fmt's %T before); the columns of a composite key do not run into each
// other (("a", "sb") is not ("as", "b")); a key type without a fast path (float64)
// still works. No server. Kills the mutants that drop the length (composite keys
// merge), the type tag ([]byte("1") and "1" merge), or keep a key's first row.
func TestDedupKeepsEachKeysLastRow(t *testing.T) {
	mk := func(vals ...[]any) []row {
		rows := make([]row, len(vals))
		for i, v := range vals {
			rows[i] = row{vals: v, src: source{"in", 0, int64(i)}}
		}
		return rows
	}
	offsets := func(rows []row) []int64 {
		var out []int64
		for _, r := range rows {
			out = append(out, r.src.offset)
		}
		return out
	}
	single := &table[string, string]{Table: Table[string, string]{Key: []string{"k"}}, keyIdx: []int{0}}
	got := single.dedup(mk(
		[]any{[]byte("a"), 1}, []any{"a", 2}, []any{[]byte("a"), 3}, []any{int64(1), 4}, []any{"1", 5},
		[]any{[]byte("1"), 6}, []any{int64(1), 7}, []any{int32(1), 8}, []any{1, 9}, []any{1.5, 10}, []any{1.5, 11}, []any{"a", 12},
	))
	if want := []int64{2, 4, 5, 6, 7, 8, 10, 11}; !slices.Equal(offsets(got), want) {
		t.Errorf("single key: kept the rows of offsets %v, want %v (each key's last; no two types merged)", offsets(got), want)
	}
	composite := &table[string, string]{Table: Table[string, string]{Key: []string{"a", "b"}}, keyIdx: []int{0, 2}}
	got = composite.dedup(mk(
		[]any{"ab", 0, "c"}, []any{"a", 0, "bc"}, []any{[]byte("ab"), 0, []byte("c")}, []any{[]byte("a"), 0, []byte("bc")}, []any{"ab", 9, "c"},
		[]any{"a", 0, "sb"}, []any{"as", 0, "b"}, []any{[]byte("a"), 0, []byte("bb")}, []any{[]byte("ab"), 0, []byte("b")},
	))
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(offsets(got), want) {
		t.Errorf("composite key: kept the rows of offsets %v, want %v", offsets(got), want)
	}
	distinct := mk([]any{"x"}, []any{"y"})
	if got := single.dedup(distinct); &got[0] != &distinct[0] {
		t.Error("a batch without repeated keys was copied, want it returned as it is")
	}
}
