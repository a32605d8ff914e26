package topologytest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// order is a JSON value with its own event time, in milliseconds.
type order struct {
	ID     string `json:"id"`
	TimeMS *int64 `json:"time_ms"`
}

// eventTime reads the value's time_ms field; a value without one gets the partition
// time (its predecessor's), which is zero, and so negative, before the first record.
func eventTime(rec processor.Record[string, order], partitionTime time.Time) (time.Time, error) {
	if rec.Value.TimeMS == nil {
		return partitionTime, nil
	}
	return time.UnixMilli(*rec.Value.TimeMS), nil
}

// stampLog forwards each record with "id stream-time" as its value: the stream time
// the processor saw, so that a test sees what the extracted timestamps did to it.
func stampLog() processor.Processor[string, order, string, string] {
	return &stampProc{}
}

type stampProc struct {
	ctx processor.Context[string, string]
}

func (p *stampProc) Init(ctx processor.Context[string, string]) error { p.ctx = ctx; return nil }
func (p *stampProc) Close() error                                     { return nil }
func (p *stampProc) Process(r processor.Record[string, order]) error {
	return p.ctx.Forward(processor.WithValue(r, fmt.Sprintf("%s st=%d", r.Value.ID, p.ctx.StreamTime().UnixMilli())))
}

func extractorDriver(t *testing.T, extract topology.TimestampExtractor[string, order], cfg topologytest.Config) *topologytest.Driver {
	t.Helper()
	b := topology.NewBuilder()
	src := topology.AddSource(b, "orders", serde.String(), serde.JSON[order](), "orders")
	if extract != nil {
		src.WithTimestampExtractor(extract)
	}
	topology.AddProcessor(b, "log", stampLog, "orders")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pipeOrder(t *testing.T, d *topologytest.Driver, id string, eventMS *int64, recordTS time.Time) error {
	t.Helper()
	v, err := json.Marshal(order{ID: id, TimeMS: eventMS})
	if err != nil {
		t.Fatal(err)
	}
	return d.PipeRaw("orders", []byte("k"), v, nil, recordTS)
}

func ms(n int64) *int64 { return &n }

func outLines(d *topologytest.Driver) string {
	var parts []string
	for _, r := range d.Records("out") {
		parts = append(parts, fmt.Sprintf("%s@%d", r.Value, r.Timestamp.UnixMilli()))
	}
	return strings.Join(parts, " | ")
}

// The extractor's timestamps are the records' timestamps downstream (the sink writes
// them) and move stream time; the record timestamps Kafka has do not count.
func TestTimestampExtractorSetsRecordAndStreamTime(t *testing.T) {
	d := extractorDriver(t, eventTime, topologytest.Config{})
	kafkaTime := time.UnixMilli(9_000_000)
	for _, in := range []struct {
		id string
		ms *int64
	}{{"a", ms(1000)}, {"b", ms(3000)}, {"c", ms(2000)}, {"d", nil}, {"e", ms(4000)}} {
		if err := pipeOrder(t, d, in.id, in.ms, kafkaTime); err != nil {
			t.Fatal(err)
		}
	}
	// d has no time: it gets the partition time, the largest extracted so far (3000).
	want := "a st=1000@1000 | b st=3000@3000 | c st=3000@2000 | d st=3000@3000 | e st=4000@4000"
	if got := outLines(d); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A negative extracted timestamp drops the record (Kafka Streams' RecordQueue: "Skipping
// record due to negative extracted timestamp"), with no error and no move of stream
// time; the partition time before the first record is zero, so a record that takes it
// is dropped too.
func TestNegativeExtractedTimestampDropsTheRecord(t *testing.T) {
	d := extractorDriver(t, eventTime, topologytest.Config{})
	kafkaTime := time.UnixMilli(9_000_000)
	for _, in := range []struct {
		id string
		ms *int64
	}{{"first-without-time", nil}, {"a", ms(1000)}, {"negative", ms(-5)}, {"b", ms(500)}} {
		if err := pipeOrder(t, d, in.id, in.ms, kafkaTime); err != nil {
			t.Fatalf("%s: %v", in.id, err)
		}
	}
	want := "a st=1000@1000 | b st=1000@500"
	if got := outLines(d); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Without an extractor a record's own negative timestamp stops the task with an error
// that names the source and says what to do (Kafka Streams' default extractor,
// FailOnInvalidTimestamp, throws); nothing is processed.
func TestNegativeRecordTimestampFailsWithoutExtractor(t *testing.T) {
	d := extractorDriver(t, nil, topologytest.Config{})
	err := pipeOrder(t, d, "old", ms(1), time.UnixMilli(-1))
	var pe *topologytest.ProcessError
	if !errors.As(err, &pe) || pe.Node != "orders" {
		t.Fatalf("got %v, want a ProcessError naming source \"orders\"", err)
	}
	if !strings.Contains(err.Error(), "negative") || !strings.Contains(err.Error(), "WithTimestampExtractor") {
		t.Errorf("the error should say the timestamp is negative and name the fix: %v", err)
	}
	if got := outLines(d); got != "" {
		t.Errorf("output %q, want none", got)
	}
	// A valid timestamp goes through.
	if err := pipeOrder(t, d, "ok", nil, time.UnixMilli(7)); err != nil {
		t.Fatal(err)
	}
	if got, want := outLines(d), "ok st=7@7"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// An extractor's error is a record that cannot be read: Fail stops with it, Skip drops
// the record and goes on.
func TestTimestampExtractorErrorIsABadRecord(t *testing.T) {
	failing := func(rec processor.Record[string, order], _ time.Time) (time.Time, error) {
		if rec.Value.ID == "bad" {
			return time.Time{}, errors.New("no time in this order")
		}
		return time.UnixMilli(42), nil
	}
	d := extractorDriver(t, failing, topologytest.Config{})
	if err := pipeOrder(t, d, "bad", nil, time.UnixMilli(1)); err == nil || !strings.Contains(err.Error(), "no time in this order") {
		t.Fatalf("got %v, want the extractor's error", err)
	}
	d = extractorDriver(t, failing, topologytest.Config{OnDeserializationError: topologytest.Skip})
	for _, id := range []string{"bad", "good"} {
		if err := pipeOrder(t, d, id, nil, time.UnixMilli(1)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := outLines(d), "good st=42@42"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Partition time is part of what a transaction commits: an aborted transaction's
// records do not move it (the replay sees the partition time of the last commit).
func TestPartitionTimeRollsBackWithTheTransaction(t *testing.T) {
	extract := func(rec processor.Record[string, order], pt time.Time) (time.Time, error) {
		if rec.Value.ID == "boom" {
			panic("boom")
		}
		return eventTime(rec, pt)
	}
	d := extractorDriver(t, extract, topologytest.Config{CommitEvery: 10})
	if err := pipeOrder(t, d, "a", ms(1000), time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := pipeOrder(t, d, "b", ms(5000), time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	if err := pipeOrder(t, d, "boom", nil, time.UnixMilli(1)); err == nil {
		t.Fatal("want the extractor's panic as an error")
	}
	// b was aborted: the partition time is a's again.
	if err := pipeOrder(t, d, "c", nil, time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := outLines(d), "a st=1000@1000 | c st=1000@1000"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// An offset reset policy that does not exist is refused at Build.
func TestUnknownOffsetResetRefused(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "src", serde.String(), serde.String(), "in").WithOffsetReset(topology.OffsetReset(9))
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "src")
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `source "src"`) || !strings.Contains(err.Error(), "offset reset") {
		t.Fatalf("got %v", err)
	}
}
