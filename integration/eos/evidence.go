//go:build unix

package eos

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/names"
)

// The evidence of a loss. A run of TestClusterShortMode (CI, Kafka 4.1.1, three brokers)
// lost six input records from the echo topic while the task's offsets record said they
// were committed and its count store restored their updates; the work dir held the
// instances' logs, but nothing told whether the echo records were never written, written
// in a transaction that aborted, or written in one that committed and then filtered out
// by a reader. The log itself tells: its batches as they are (read_uncommitted), with
// their producer IDs, epochs and markers, and what a read_committed reader is told is
// aborted. So when the verifier finds input lost from, or repeated in, the echo topic,
// the harness reads that around each place and writes it to the report.

// rawBatch is a batch of a partition's log as the broker holds it, aborted or not.
type rawBatch struct {
	first, last   int64
	producerID    int64
	epoch         int16
	transactional bool
	control       bool
	abort         bool // a control batch holding an abort marker (else a commit)
	records       []kread.Record
}

// maxRawBatches bounds what one read of raw batches returns.
const maxRawBatches = 20000

// readRawBatches returns the batches of topic/p whose offsets lie in [from, to) (a batch
// that starts below from and ends in it too), read with read_uncommitted, at most
// maxRawBatches; and the aborted transactions a read_committed reader of the same range
// is told of, in the order the broker gives them.
func readRawBatches(client sarama.Client, topic string, p int32, from, to int64) ([]rawBatch, []*sarama.AbortedTransaction, error) {
	var out []rawBatch
	for next := from; next < to && len(out) < maxRawBatches; {
		block, err := kread.FetchBlock(client, topic, p, next, 4<<20, sarama.ReadUncommitted)
		if err != nil {
			return out, nil, err
		}
		moved := false
		for _, recs := range block.RecordsSet {
			b := recs.RecordBatch
			if b == nil || b.PartialTrailingRecord {
				break
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if last < next {
				continue
			}
			if b.FirstOffset >= to {
				break
			}
			rb := rawBatch{first: b.FirstOffset, last: last, producerID: b.ProducerID, epoch: b.ProducerEpoch,
				transactional: b.IsTransactional, control: b.Control}
			if b.Control {
				rb.abort = len(b.Records) > 0 && controlIsAbort(b.Records[0].Key)
			} else {
				for _, r := range b.Records {
					rb.records = append(rb.records, kread.Record{Offset: b.FirstOffset + r.OffsetDelta, Key: r.Key, Value: r.Value})
				}
			}
			out = append(out, rb)
			next, moved = last+1, true
		}
		if !moved {
			break // the end of the log, or a batch larger than the fetch
		}
	}
	var aborted []*sarama.AbortedTransaction
	seen := map[[2]int64]bool{}
	for next := from; next < to; {
		block, err := kread.FetchBlock(client, topic, p, next, 4<<20, sarama.ReadCommitted)
		if err != nil {
			return out, aborted, err
		}
		for _, a := range block.AbortedTransactions {
			if k := [2]int64{a.ProducerID, a.FirstOffset}; !seen[k] {
				seen[k] = true
				aborted = append(aborted, a)
			}
		}
		moved := false
		for _, recs := range block.RecordsSet {
			if b := recs.RecordBatch; b != nil && !b.PartialTrailingRecord {
				if last := b.FirstOffset + int64(b.LastOffsetDelta); last >= next {
					next, moved = last+1, true
				}
			}
		}
		if !moved {
			break // the last stable offset
		}
	}
	return out, aborted, nil
}

// controlIsAbort reads a control record key: int16 version, int16 type (0 abort, 1 commit).
func controlIsAbort(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == 0
}

// describe writes one line per batch: its offsets, producer, whether transactional,
// and what it holds (a marker; the records through show).
func describeBatches(b *strings.Builder, topic string, p int32, batches []rawBatch, show func(kread.Record) string) {
	for _, rb := range batches {
		fmt.Fprintf(b, "  %s/%d %d-%d pid %d epoch %d", topic, p, rb.first, rb.last, rb.producerID, rb.epoch)
		switch {
		case rb.control && rb.abort:
			b.WriteString(" ABORT marker\n")
			continue
		case rb.control:
			b.WriteString(" COMMIT marker\n")
			continue
		case rb.transactional:
			b.WriteString(" txn")
		default:
			b.WriteString(" plain")
		}
		parts := make([]string, 0, len(rb.records))
		for _, r := range rb.records {
			parts = append(parts, show(r))
		}
		fmt.Fprintf(b, " [%s]\n", strings.Join(parts, " "))
	}
}

func describeAborted(b *strings.Builder, aborted []*sarama.AbortedTransaction) {
	if len(aborted) == 0 {
		b.WriteString("  a read_committed reader is told of no aborted transaction here\n")
		return
	}
	parts := make([]string, 0, len(aborted))
	for _, a := range aborted {
		parts = append(parts, fmt.Sprintf("pid %d from %d", a.ProducerID, a.FirstOffset))
	}
	fmt.Fprintf(b, "  aborted transactions a read_committed reader is told of: %s\n", strings.Join(parts, ", "))
}

// inputRun is a run of consecutive input records of a partition that an output lost.
type inputRun struct {
	partition int32
	lo, hi    int // indexes into Observed.Input[partition]
}

// lostEchoRuns returns the runs of input records of each partition missing from the
// echo topic, at most max.
func lostEchoRuns(o *Observed, max int) []inputRun {
	seen := map[int64]bool{}
	for _, recs := range o.Echo {
		for _, r := range recs {
			if r.Bad == "" {
				seen[r.Input] = true
			}
		}
	}
	var runs []inputRun
	for _, p := range sortedPartitions(o.Input) {
		in := o.Input[p]
		for i := 0; i < len(in) && len(runs) < max; i++ {
			if seen[in[i].Value] {
				continue
			}
			j := i
			for j+1 < len(in) && !seen[in[j+1].Value] {
				j++
			}
			runs = append(runs, inputRun{partition: p, lo: i, hi: j})
			i = j
		}
	}
	return runs
}

// echoAt returns the echo offset of input value v in partition p, or -1.
func echoAt(o *Observed, p int32, v int64) int64 {
	for _, r := range o.Echo[p] {
		if r.Bad == "" && r.Input == v {
			return r.Offset
		}
	}
	return -1
}

// evidenceTail is how far a window reaches past the echo record of the run's next
// neighbour: to the marker that decided its batch.
const evidenceTail = 20

// evidenceMargin is how many offsets a window reaches past the records it is about
// when no neighbour bounds it.
const evidenceMargin = 200

// lossEvidence describes, for each run of input records lost from the echo topic (at
// most three), the echo partition's raw log between the echo records of the run's
// neighbours, the task's offsets record around the run's offsets (sub-topology 0's
// offsets store changelog, same partition), the aborted transactions a read_committed
// reader of each is told of, and the group's committed offsets of the partition around
// the run; "" when nothing was lost from the echo topic.
func lossEvidence(client sarama.Client, n Names, o *Observed) string {
	runs := lostEchoRuns(o, 3)
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, run := range runs {
		in := o.Input[run.partition]
		lo, hi := in[run.lo].Offset, in[run.hi].Offset
		fmt.Fprintf(&b, "input %s/%d offsets %d-%d (values %d-%d) are not in the echo topic\n", n.Input, run.partition, lo, hi, in[run.lo].Value, in[run.hi].Value)
		from, to := int64(-1), int64(-1)
		if run.lo > 0 {
			from = echoAt(o, run.partition, in[run.lo-1].Value)
		}
		if run.hi+1 < len(in) {
			if at := echoAt(o, run.partition, in[run.hi+1].Value); at >= 0 {
				to = at + evidenceTail // and the marker that decided its batch
			}
		}
		switch {
		case from < 0 && to < 0:
			from, to = 0, evidenceMargin
		case from < 0:
			from = max(0, to-evidenceMargin)
		case to < 0:
			to = from + evidenceMargin
		}
		fmt.Fprintf(&b, " echo partition %d, offsets %d-%d (from the echo records of the run's neighbours), as the log holds them:\n", run.partition, from, to-1)
		batches, aborted, err := readRawBatches(client, n.Echo, run.partition, from, to)
		if err != nil {
			fmt.Fprintf(&b, "  reading it: %v\n", err)
		}
		describeBatches(&b, n.Echo, run.partition, batches, func(r kread.Record) string {
			if v, err := DecodeInt64(r.Value); err == nil {
				return fmt.Sprint(v)
			}
			return "?"
		})
		describeAborted(&b, aborted)
		offsetsRecordEvidence(&b, client, n, run.partition, lo, hi)
		fmt.Fprintf(&b, " the group's committed offsets of %s/%d near the run, in log order:", n.Input, run.partition)
		for _, c := range o.OffsetCommits {
			if c.Topic == n.Input && c.Partition == run.partition && c.Offset >= lo-evidenceMargin && c.Offset <= hi+evidenceMargin {
				fmt.Fprintf(&b, " %d", c.Offset)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// offsetsRecordEvidence describes the batches of the task's offsets record from the last
// one recording an input offset at or below lo to the first recording one above hi.
func offsetsRecordEvidence(b *strings.Builder, client sarama.Client, n Names, p int32, lo, hi int64) {
	topic := names.ChangelogTopic(n.App, names.OffsetsStore(0))
	high, err := highWaterMark(client, topic, p)
	if err != nil {
		fmt.Fprintf(b, "  the offsets record %s/%d: %v\n", topic, p, err)
		return
	}
	batches, aborted, err := readRawBatches(client, topic, p, 0, high)
	if err != nil {
		fmt.Fprintf(b, "  reading the offsets record %s/%d: %v\n", topic, p, err)
	}
	recorded := func(rb rawBatch) (int64, bool) {
		for _, r := range rb.records {
			if string(r.Key) == n.Input && len(r.Value) >= 8 {
				return int64(binary.BigEndian.Uint64(r.Value)), true
			}
		}
		return 0, false
	}
	start, end := 0, len(batches)
	for i, rb := range batches {
		if v, ok := recorded(rb); ok && v <= lo {
			start = i
		}
	}
	for i := start; i < len(batches); i++ {
		if v, ok := recorded(batches[i]); ok && v > hi+1 {
			end = min(len(batches), i+2) // and its marker
			break
		}
	}
	window := batches[start:end]
	if len(window) > 60 {
		window = slices.Concat(window[:30], window[len(window)-30:])
	}
	fmt.Fprintf(b, " the task's offsets record %s/%d (input offsets it records), as the log holds it:\n", topic, p)
	describeBatches(b, topic, p, window, func(r kread.Record) string {
		if string(r.Key) == n.Input && len(r.Value) >= 8 {
			return fmt.Sprintf("%s=%d", n.Input, int64(binary.BigEndian.Uint64(r.Value)))
		}
		if len(r.Key) > 0 && r.Key[0] == 0 {
			return "nonce"
		}
		return string(r.Key)
	})
	if len(window) > 0 {
		var inWindow []*sarama.AbortedTransaction
		for _, a := range aborted {
			if a.FirstOffset <= window[len(window)-1].last && a.FirstOffset >= window[0].first-evidenceMargin {
				inWindow = append(inWindow, a)
			}
		}
		describeAborted(b, inWindow)
	}
}

// maxEvidenceLogLines bounds the instances' log lines the evidence quotes.
const maxEvidenceLogLines = 80

// evidenceLogLines returns the lines of the logs at paths (name: the process each is of)
// that say what happened to the tasks of sub-topology 0 that read partitions: their
// warnings and errors, and the worker's lines about a failed transaction (they name no
// task), at most maxEvidenceLogLines.
func evidenceLogLines(logs map[string]string, partitions []int32) []string {
	var tasks [][]byte
	for _, p := range partitions {
		tasks = append(tasks, fmt.Appendf(nil, `"task":"0_%d"`, p))
	}
	worker := [][]byte{[]byte("transaction failed"), []byte("during a failed transaction"), []byte("outcome was unknown")}
	var out []string
	more := 0
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		f, err := os.Open(logs[name])
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			warn := bytes.Contains(line, []byte(`"level":"WARN"`)) || bytes.Contains(line, []byte(`"level":"ERROR"`))
			ours := slices.ContainsFunc(tasks, func(t []byte) bool { return bytes.Contains(line, t) })
			failed := slices.ContainsFunc(worker, func(w []byte) bool { return bytes.Contains(line, w) })
			if !(ours && warn) && !failed {
				continue
			}
			if len(out) >= maxEvidenceLogLines {
				more++
				continue
			}
			out = append(out, name+": "+string(line))
		}
		_ = f.Close()
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("(%d more such lines in the instances' logs)", more))
	}
	return out
}
