package eddy

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// fixedRecord is an offsetsSource whose last offsets record is fixed: the record's
// reading from Kafka is TestOffsetsRecordAfterManyAbortedTxns's business; this one is
// about what the task makes of it.
type fixedRecord struct {
	last map[string][]byte
	hwm  int64
}

func (f fixedRecord) readLast(context.Context, string, int32, int) (map[string][]byte, error) {
	return f.last, nil
}
func (f fixedRecord) highWaterMark(string, int32) (int64, error) { return f.hwm, nil }
func (f fixedRecord) topicIDs([]string) (map[string]sarama.Uuid, error) {
	return map[string]sarama.Uuid{}, nil
}

// TestOffsetsRecordWarnsOfAStaleCoordinatorOnlyAtStart: a task's offsets record above
// the group's committed offset means a stale coordinator only when the task reads it at
// a start; at a settle after an unknown outcome the record is that commit's own, and the
// warning said the coordinator was wrong after every unknown outcome that committed.
// Either way the committed offset moves up to the record.
func TestOffsetsRecordWarnsOfAStaleCoordinatorOnlyAtStart(t *testing.T) {
	const warning = "the group coordinator answered a committed offset older"
	src := fixedRecord{hwm: 100, last: map[string][]byte{
		"in":      encodeOffset(20, sarama.Uuid{}),
		commitKey: binary.BigEndian.AppendUint64(nil, 7),
	}}
	for _, c := range []struct {
		name  string
		why   recordRead
		own   int64 // the task's own last commit (negative: none)
		warns bool
	}{
		{"start, a new task", readAtStart, -1, true},
		{"start, the coordinator behind the task's own commit", readAtStart, 15, true},
		{"start, after the task's own commit of the record", readAtStart, 20, false},
		{"settle, the unknown commit's record", readAtSettle, 15, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			committed := newCommittedOffsets()
			committed.claim("in", 10)
			if c.own >= 0 {
				committed.advance("in", c.own)
			}
			r := &offsetsRecord{topic: "offsets", partition: 0, sources: []string{"in"}, committed: committed,
				logger: slog.New(slog.NewTextHandler(&logs, nil))}
			nonce, err := r.read(context.Background(), src, c.why)
			if err != nil {
				t.Fatal(err)
			}
			if nonce != 7 {
				t.Errorf("nonce %d, want 7", nonce)
			}
			if got := committed.of("in"); got != 20 {
				t.Errorf("committed offset %d after the read, want the record's 20", got)
			}
			if warned := strings.Contains(logs.String(), warning); warned != c.warns {
				t.Errorf("warned=%v, want %v; log:\n%s", warned, c.warns, logs.String())
			}
		})
	}
}
