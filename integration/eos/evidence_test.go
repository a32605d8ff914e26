//go:build unix

package eos

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestLossEvidence loses input 5 and 6 the way a transaction that aborted loses them:
// echo records and the offsets record of the input before them and after them commit,
// theirs abort. The evidence names the lost run, shows the aborted transaction's batch
// of the echo topic with its values and producer, its ABORT marker after it, tells the
// aborted transaction a read_committed reader is told of, and shows the offsets record
// that recorded 7 in the aborted transaction between those that recorded 5 and 11.
func TestLossEvidence(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		n := NamesFor(c.Unique("evidence"))
		offsets := names.ChangelogTopic(n.App, names.OffsetsStore(0))
		for _, topic := range []string{n.Input, n.Echo, offsets} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		for v := int64(1); v <= 10; v++ {
			if err := c.ProduceToPartition(ctx, n.Input, 0, &sarama.ProducerMessage{Key: sarama.StringEncoder("k"), Value: sarama.ByteEncoder(EncodeInt64(v))}); err != nil {
				t.Fatal(err)
			}
		}
		txn := func(commit bool, from, to int64) {
			t.Helper()
			var msgs []*sarama.ProducerMessage
			for v := from; v <= to; v++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: n.Echo, Key: sarama.StringEncoder("k"), Value: sarama.ByteEncoder(EncodeInt64(v))})
			}
			// The offsets record: the input offset after the last one (value v is at v-1).
			rec := binary.BigEndian.AppendUint64(nil, uint64(to))
			msgs = append(msgs, &sarama.ProducerMessage{Topic: offsets, Key: sarama.StringEncoder(n.Input), Value: sarama.ByteEncoder(rec)})
			if err := c.ProduceTxn(ctx, c.Unique("txn"), commit, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		txn(true, 1, 4)
		txn(false, 5, 6)
		txn(true, 7, 10)
		for _, topic := range []string{n.Echo, offsets} {
			if err := c.WaitStable(ctx, topic); err != nil {
				t.Fatal(err)
			}
		}

		client, err := newClient(c.Addrs())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		o := &Observed{Input: map[int32][]InRecord{}, Echo: map[int32][]OutRecord{}}
		for topic, add := range map[string]func(kread.Record, int64){
			n.Input: func(r kread.Record, v int64) {
				o.Input[0] = append(o.Input[0], InRecord{Offset: r.Offset, Key: "k", Value: v})
			},
			n.Echo: func(r kread.Record, v int64) {
				o.Echo[0] = append(o.Echo[0], OutRecord{Offset: r.Offset, Key: "k", Input: v, Value: v})
			},
		} {
			_, end, err := kread.EndOffsets(client, topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := kread.ReadRange(ctx, client, topic, 0, 0, end, func(r kread.Record) error {
				v, err := DecodeInt64(r.Value)
				add(r, v)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(o.Input[0]) != 10 || len(o.Echo[0]) != 8 {
			t.Fatalf("read back %d input and %d echo records; want 10 and 8", len(o.Input[0]), len(o.Echo[0]))
		}

		ev := lossEvidence(client, n, o)
		t.Logf("evidence:\n%s", ev)
		// sarama batches a transaction's records as it likes: one batch or several.
		pid := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(n.Echo) + `/0 \d+-\d+ pid (\d+) epoch \d+ txn \[(?:\d+ )*5(?: \d+)*\]$`).FindStringSubmatch(ev)
		if pid == nil {
			t.Fatalf("no transactional echo batch holding 5 in the evidence")
		}
		for _, want := range []string{
			fmt.Sprintf("input %s/0 offsets 4-5 (values 5-6) are not in the echo topic", n.Input),
			fmt.Sprintf(" pid %s epoch", pid[1]),
			"aborted transactions a read_committed reader is told of: pid " + pid[1] + " from ",
			n.Input + "=4]", n.Input + "=6]", n.Input + "=10]",
		} {
			if !strings.Contains(ev, want) {
				t.Errorf("the evidence lacks %q", want)
			}
		}
		// The aborted batches are followed by an ABORT marker, the others by COMMIT markers
		// (consecutive data batches count once).
		echoLines := regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(n.Echo)+`/0 .*$`).FindAllString(ev, -1)
		var kinds, values []string
		for _, l := range echoLines {
			if i := strings.Index(l, " txn ["); i >= 0 {
				values = append(values, strings.Fields(strings.Trim(l[i+len(" txn "):], "[]"))...)
			}
			kind := "data"
			switch {
			case strings.HasSuffix(l, "ABORT marker"):
				kind = "abort"
			case strings.HasSuffix(l, "COMMIT marker"):
				kind = "commit"
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != kind {
				kinds = append(kinds, kind)
			}
		}
		if got, want := strings.Join(kinds, " "), "data commit data abort data commit"; got != want {
			t.Errorf("echo batches: %s; want %s", got, want)
		}
		if got := " " + strings.Join(values, " "); !strings.HasSuffix(got, " 4 5 6 7 8 9 10") {
			t.Errorf("echo values shown:%s; want 4 to 10 (the neighbours and the lost run, aborted, between)", got)
		}
	})
}

// The log lines the evidence quotes: a warning of a task reading the partition, and a
// worker's failed transaction; not another partition's task, nor a task's info line.
func TestEvidenceLogLines(t *testing.T) {
	dir := t.TempDir()
	log := strings.Join([]string{
		`{"level":"WARN","msg":"the group coordinator answered a committed offset older than the task's own record","task":"0_1"}`,
		`{"level":"WARN","msg":"standby replica: reading the changelogs failed","task":"0_2"}`,
		`{"level":"INFO","msg":"store restored","task":"0_1"}`,
		`{"level":"WARN","msg":"transaction failed; rolling back and replaying its input","worker":0}`,
		`{"level":"INFO","msg":"session ended during a failed transaction; dropping it","worker":1}`,
		`{"level":"ERROR","msg":"giving up","task":"0_11"}`,
	}, "\n")
	path := dir + "/i0-1.log"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := evidenceLogLines(map[string]string{"i0-1.log": path}, []int32{1})
	want := []string{"committed offset older", "transaction failed", "session ended during a failed transaction"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], "i0-1.log: ") || !strings.Contains(got[i], w) {
			t.Errorf("line %d: %s; want it from i0-1.log, saying %q", i, got[i], w)
		}
	}
}
