package statestore

import (
	"bytes"
	"fmt"
	"slices"
)

// RestoreBatch makes the backend write that applies one fetched batch of a store's
// changelog records: deduplicated (a key's last record wins, as in the log), sorted by
// key (bbolt inserts sorted keys several times faster), with the checkpoint next, the
// offset of the record after the batch. records is not modified; the batch refers to
// its keys and values, which must stay unchanged until the write returns. A nil Value
// is a tombstone.
func RestoreBatch(store string, records []Entry, next int64) Batch {
	es := slices.Clone(records)
	// A stable sort keeps equal keys in log order; keep the last of each run.
	slices.SortStableFunc(es, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	out := es[:0]
	for i, e := range es {
		if i+1 < len(es) && bytes.Equal(e.Key, es[i+1].Key) {
			continue
		}
		out = append(out, e)
	}
	return Batch{Writes: map[string][]Entry{store: out}, Checkpoints: map[string]int64{store: next}}
}

// Restore applies one fetched batch of the store's changelog records to its backend
// in one atomic write, together with the checkpoint next (the offset of the record
// after the batch), as RestoreBatch describes. Restore before processing: the write
// buffer must be empty, or its values would hide the restored ones.
func (b *Buffer) Restore(records []Entry, next int64) error {
	if len(b.dirty) > 0 {
		return &StoreError{Store: b.name, Op: "restore", Err: fmt.Errorf("%d buffered changes: restore before processing", len(b.dirty))}
	}
	if err := b.backend.Write(RestoreBatch(b.name, records, next)); err != nil {
		return &StoreError{Store: b.name, Op: "restore", Err: err}
	}
	return nil
}
