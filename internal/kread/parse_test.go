package kread

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/IBM/sarama"
)

// batch makes a record batch of producer pid at first with the given values (a nil
// value list makes a control batch with the marker kind: 0 abort, 1 commit).
func batch(first int64, pid int64, txn bool, values ...string) *sarama.Records {
	b := &sarama.RecordBatch{FirstOffset: first, ProducerID: pid, IsTransactional: txn}
	for i, v := range values {
		b.Records = append(b.Records, &sarama.Record{OffsetDelta: int64(i), Key: []byte("k"), Value: []byte(v)})
	}
	b.LastOffsetDelta = int32(max(len(values)-1, 0))
	return &sarama.Records{RecordBatch: b}
}

func marker(offset, pid int64, commit bool) *sarama.Records {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), map[bool]uint16{false: 0, true: 1}[commit])
	b := &sarama.RecordBatch{FirstOffset: offset, ProducerID: pid, IsTransactional: true, Control: true,
		Records: []*sarama.Record{{Key: key}}}
	return &sarama.Records{RecordBatch: b}
}

func values(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// parseBlock keeps committed and plain records, drops an aborted transaction's records
// until its abort marker, and moves the next offset past markers, all within [next, end).
func TestParseBlockReadCommitted(t *testing.T) {
	block := &sarama.FetchResponseBlock{
		RecordsSet: []*sarama.Records{
			batch(0, 1, true, "c0", "c1"), // committed by the marker at 2
			marker(2, 1, true),
			batch(3, 2, true, "a3", "a4"), // aborted by the marker at 6
			batch(5, 0, false, "p5"),      // plain, between the aborted batch and its marker
			marker(6, 2, false),
			batch(7, 2, true, "c7"), // producer 2's next transaction, committed at 8
			marker(8, 2, true),
		},
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 2, FirstOffset: 3}},
	}
	got, next := parseBlock(block, 0, 100)
	if want := []string{"c0", "c1", "p5", "c7"}; !slices.Equal(values(got), want) {
		t.Errorf("records %v, want %v", values(got), want)
	}
	if next != 9 {
		t.Errorf("next %d, want 9 (past the last marker)", next)
	}
	// From the middle, with an end below the last batches.
	got, next = parseBlock(block, 1, 6)
	if want := []string{"c1", "p5"}; !slices.Equal(values(got), want) {
		t.Errorf("records of [1, 6): %v, want %v", values(got), want)
	}
	if next != 6 {
		t.Errorf("next %d, want the end 6", next)
	}
	for _, r := range got {
		if r.Offset < 1 || r.Offset >= 6 {
			t.Errorf("offset %d outside [1, 6)", r.Offset)
		}
	}
}

// A batch cut off by the response size ends the parse: next stays before it.
func TestParseBlockStopsAtAPartialBatch(t *testing.T) {
	cut := batch(2, 0, false, "x2")
	cut.RecordBatch.PartialTrailingRecord = true
	block := &sarama.FetchResponseBlock{RecordsSet: []*sarama.Records{batch(0, 0, false, "p0", "p1"), cut}}
	got, next := parseBlock(block, 0, 10)
	if want := []string{"p0", "p1"}; !slices.Equal(values(got), want) || next != 2 {
		t.Errorf("records %v next %d, want %v and 2", values(got), next, want)
	}
}
