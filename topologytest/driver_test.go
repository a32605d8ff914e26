package topologytest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// summer adds each record's int64 value to its key's total in store "totals" and
// forwards the new total; a negative value is an error, after the total was forwarded.
type summer struct {
	ctx    processor.Context[string, int64]
	totals statestore.KeyValueStore[string, int64]
}

func (s *summer) Init(ctx processor.Context[string, int64]) (err error) {
	s.ctx = ctx
	s.totals, err = processor.KeyValueStore[string, int64](ctx, "totals")
	return err
}

func (s *summer) Process(rec processor.Record[string, int64]) error {
	n, _, err := s.totals.Get(rec.Key)
	if err != nil {
		return err
	}
	if err := s.totals.Put(rec.Key, n+rec.Value); err != nil {
		return err
	}
	if err := s.ctx.Forward(processor.WithValue(rec, n+rec.Value)); err != nil {
		return err
	}
	if rec.Value < 0 {
		return fmt.Errorf("negative amount %d", rec.Value)
	}
	return nil
}

func (s *summer) Close() error { return nil }

// sums: "amounts" (String, Int64) → repartition "by-key" → sum (store totals) → "totals".
func sums(t *testing.T, cfg topologytest.Config) *topologytest.Driver {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "amounts", serde.String(), serde.Int64(), "amounts")
	topology.AddRepartition(b, "by-key", serde.String(), serde.Int64(), "amounts")
	topology.AddProcessor(b, "sum", func() processor.Processor[string, int64, string, int64] { return &summer{} }, "by-key")
	topology.AddKeyValueStore(b, "totals", serde.String(), serde.Int64(), "sum")
	topology.AddSink(b, "out", "totals", serde.String(), serde.Int64(), "sum")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StartTime.IsZero() {
		cfg.StartTime = start
	}
	d, err := topologytest.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func readAll(t *testing.T, out *topologytest.OutputTopic[string, int64]) []string {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%d", r.Key, r.Value))
	}
	return got
}

func TestPipeAndRead(t *testing.T) {
	d := sums(t, topologytest.Config{ApplicationID: "app", AutoAdvance: time.Second})
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	out := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64())
	for _, kv := range []struct {
		k string
		v int64
	}{{"a", 1}, {"b", 10}, {"a", 2}} {
		if err := in.Pipe(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, out); !slices.Equal(got, []string{"a=1", "b=10", "a=3"}) {
		t.Fatalf("got %q", got)
	}
	// Read marks records read.
	if got := readAll(t, out); len(got) != 0 {
		t.Fatalf("second read got %q", got)
	}
	if err := in.Pipe("b", 5); err != nil {
		t.Fatal(err)
	}
	m, err := out.ReadKeyValueMap()
	if err != nil || len(m) != 1 || m["b"] != 15 {
		t.Fatalf("ReadKeyValueMap = %v, %v", m, err)
	}

	// Default timestamps start at StartTime and move by AutoAdvance; the sink keeps them.
	recs := d.Records("totals")
	for i, r := range recs {
		if want := start.Add(time.Duration(i) * time.Second); !r.Timestamp.Equal(want) || r.Offset != int64(i) {
			t.Errorf("record %d: offset %d, timestamp %v; want %v", i, r.Offset, r.Timestamp, want)
		}
	}
	// The repartition topic is an internal topic of the application.
	if n := len(d.Records("app-by-key-repartition")); n != 4 {
		t.Errorf("repartition topic has %d records, want 4", n)
	}
	// The changelog has one record per key and commit (one commit per record).
	cl := d.Records(d.ChangelogTopic("totals"))
	if d.ChangelogTopic("totals") != "app-totals-changelog" || len(cl) != 4 {
		t.Fatalf("changelog %s has %d records", d.ChangelogTopic("totals"), len(cl))
	}
	last := cl[len(cl)-1]
	if string(last.Key) != "b" || string(last.Value) != "\x00\x00\x00\x00\x00\x00\x00\x0f" {
		t.Errorf("last changelog record %q=%x", last.Key, last.Value)
	}
	st, err := topologytest.KeyValueStore[string, int64](d, "totals")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int64{"a": 3, "b": 15} {
		if v, ok, err := st.Get(k); err != nil || !ok || v != want {
			t.Errorf("store %s = %d, %v, %v; want %d", k, v, ok, err, want)
		}
	}
}

func TestPipeAtKeepsTimestampsAndHeaders(t *testing.T) {
	d := sums(t, topologytest.Config{})
	ts := start.Add(42 * time.Minute)
	if err := d.PipeRaw("amounts", []byte("k"), []byte{0, 0, 0, 0, 0, 0, 0, 7}, []processor.Header{{Key: "trace", Value: []byte("t-1")}}, ts); err != nil {
		t.Fatal(err)
	}
	recs, err := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()).ReadRecords()
	if err != nil || len(recs) != 1 {
		t.Fatalf("%v, %v", recs, err)
	}
	r := recs[0]
	if r.Key != "k" || r.Value != 7 || !r.Timestamp.Equal(ts) || len(r.Headers) != 1 || string(r.Headers[0].Value) != "t-1" {
		t.Fatalf("got %+v", r)
	}
}

func TestPipeToUnknownTopic(t *testing.T) {
	d := sums(t, topologytest.Config{ApplicationID: "app"})
	err := d.PipeRaw("amounnts", nil, []byte("x"), nil, time.Time{})
	if err == nil {
		t.Fatal("pipe to an unknown topic succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, `"amounnts"`) || !strings.Contains(msg, "amounts") || !strings.Contains(msg, "app-by-key-repartition") {
		t.Fatalf("error %q should name the topic and list the ones sources read", msg)
	}
	// The output topic is not an input.
	if err := topologytest.NewInputTopic(d, "totals", serde.String(), serde.Int64()).Pipe("a", 1); err == nil {
		t.Fatal("pipe to an output topic succeeded")
	}
}

func TestProcessErrorNamesTaskNodeOffsetAndRollsBack(t *testing.T) {
	d := sums(t, topologytest.Config{ApplicationID: "app"})
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	out := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64())
	for _, v := range []int64{1, 2} {
		if err := in.Pipe("a", v); err != nil {
			t.Fatal(err)
		}
	}
	readAll(t, out)
	err := in.Pipe("a", -10)
	var pe *topologytest.ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("Pipe = %v; want a *ProcessError", err)
	}
	if pe.Task.String() != "1_0" || pe.Node != "sum" || pe.Record == nil ||
		pe.Record.Topic != "app-by-key-repartition" || pe.Record.Partition != 0 || pe.Record.Offset != 2 {
		t.Fatalf("ProcessError %+v (record %+v); want task 1_0, node sum, app-by-key-repartition/0 offset 2", pe, pe.Record)
	}
	if msg := err.Error(); !strings.Contains(msg, "1_0") || !strings.Contains(msg, `"sum"`) || !strings.Contains(msg, "offset 2") || !strings.Contains(msg, "negative amount -10") {
		t.Fatalf("message %q should name task, node, offset and cause", msg)
	}
	// Aborted: the total forwarded before the error is not in the output, the store and
	// changelog keep the last committed total.
	if got := readAll(t, out); len(got) != 0 {
		t.Fatalf("output of the failed record is visible: %q", got)
	}
	st, _ := topologytest.KeyValueStore[string, int64](d, "totals")
	if v, _, _ := st.Get("a"); v != 3 {
		t.Fatalf("store a = %d after a failed record, want 3", v)
	}
	if n := len(d.Records(d.ChangelogTopic("totals"))); n != 2 {
		t.Fatalf("changelog has %d records, want 2", n)
	}
	// The driver goes on.
	if err := in.Pipe("a", 4); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, out); !slices.Equal(got, []string{"a=7"}) {
		t.Fatalf("after the error got %q", got)
	}
}

func badAmounts(t *testing.T, d *topologytest.Driver) {
	t.Helper()
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	if err := in.Pipe("a", 1); err != nil {
		t.Fatal(err)
	}
}

func TestDeserializationFail(t *testing.T) {
	d := sums(t, topologytest.Config{})
	badAmounts(t, d)
	err := d.PipeRaw("amounts", []byte("a"), []byte("not eight bytes"), nil, time.Time{})
	var pe *topologytest.ProcessError
	var se *serde.Error
	if !errors.As(err, &pe) || pe.Node != "amounts" || pe.Record == nil || pe.Record.Offset != 1 || pe.Task.String() != "0_0" {
		t.Fatalf("error %v; want a ProcessError of task 0_0, source amounts, offset 1", err)
	}
	if !errors.As(err, &se) || se.Serde != "Int64" || se.Topic != "amounts" || !strings.Contains(err.Error(), "value") {
		t.Fatalf("error %v; want the Int64 serde error on the value", err)
	}
}

func TestDeserializationTombstoneHint(t *testing.T) {
	d := sums(t, topologytest.Config{})
	err := d.PipeRaw("amounts", []byte("a"), nil, nil, time.Time{})
	if !errors.Is(err, serde.ErrTombstone) || !strings.Contains(err.Error(), "serde.Nullable") {
		t.Fatalf("error %v; want ErrTombstone with a hint to use serde.Nullable", err)
	}
}

// A record without a key reaches processors with the zero key, as from Kafka's console
// producer; a key that is present but malformed is an error.
func TestNilKeyIsZeroKey(t *testing.T) {
	d := sums(t, topologytest.Config{})
	if err := d.PipeRaw("amounts", nil, []byte{0, 0, 0, 0, 0, 0, 0, 5}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()))
	if !slices.Equal(got, []string{"=5"}) {
		t.Fatalf("got %q", got)
	}
}

func TestDeserializationSkip(t *testing.T) {
	d := sums(t, topologytest.Config{OnDeserializationError: topologytest.Skip})
	badAmounts(t, d)
	if err := d.PipeRaw("amounts", []byte("a"), []byte("junk"), nil, time.Time{}); err != nil {
		t.Fatalf("Skip returned %v", err)
	}
	badAmounts(t, d)
	got := readAll(t, topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()))
	if !slices.Equal(got, []string{"a=1", "a=2"}) {
		t.Fatalf("got %q; the bad record should be skipped and the next processed", got)
	}
}

func TestDeserializationDeadLetter(t *testing.T) {
	d := sums(t, topologytest.Config{ApplicationID: "app", OnDeserializationError: topologytest.DeadLetter, DeadLetterTopic: "dlq"})
	badAmounts(t, d)
	orig := []processor.Header{{Key: "source", Value: []byte("test")}}
	ts := start.Add(time.Hour)
	if err := d.PipeRaw("amounts", []byte("a"), []byte("junk"), orig, ts); err != nil {
		t.Fatalf("DeadLetter returned %v", err)
	}
	badAmounts(t, d)
	dlq := d.Records("dlq")
	if len(dlq) != 1 {
		t.Fatalf("dead-letter topic has %d records, want 1", len(dlq))
	}
	r := dlq[0]
	if string(r.Key) != "a" || string(r.Value) != "junk" || !r.Timestamp.Equal(ts) {
		t.Fatalf("dead letter %q=%q at %v; want the record as it was read", r.Key, r.Value, r.Timestamp)
	}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	for k, want := range map[string]string{
		"source":                        "test",
		topologytest.HeaderDLQTopic:     "amounts",
		topologytest.HeaderDLQPartition: "0",
		topologytest.HeaderDLQOffset:    "1",
		topologytest.HeaderDLQNode:      "amounts",
		topologytest.HeaderDLQTask:      "0_0",
	} {
		if h[k] != want {
			t.Errorf("header %s = %q, want %q", k, h[k], want)
		}
	}
	if e := h[topologytest.HeaderDLQError]; !strings.Contains(e, "Int64") || !strings.Contains(e, "value") {
		t.Errorf("error header %q should say which serde failed on what", e)
	}
	got := readAll(t, topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()))
	if !slices.Equal(got, []string{"a=1", "a=2"}) {
		t.Fatalf("got %q", got)
	}
}

func TestDeadLetterNeedsTopic(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = topologytest.New(topo, topologytest.Config{OnDeserializationError: topologytest.DeadLetter})
	if err == nil || !strings.Contains(err.Error(), "dead-letter topic") {
		t.Fatalf("New = %v; want an error asking for the dead-letter topic", err)
	}
}

// A topic written by one sub-topology's sink and read by another's source is processed
// right after the record that caused it.
func TestTopicReadBack(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "first")
	topology.AddProcessor(b, "upper", processor.MapValues[string](func(v string) (string, error) { return strings.ToUpper(v), nil }), "in")
	topology.AddSink(b, "mid", "second", serde.String(), serde.String(), "upper")
	topology.AddSource(b, "again", serde.String(), serde.String(), "second")
	topology.AddProcessor(b, "bang", processor.MapValues[string](func(v string) (string, error) { return v + "!", nil }), "again")
	topology.AddSink(b, "out", "third", serde.String(), serde.String(), "bang")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topo.Subtopologies()); n != 2 {
		t.Fatalf("%d sub-topologies", n)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := topologytest.NewInputTopic(d, "first", serde.String(), serde.String()).PipeValues("a", "b"); err != nil {
		t.Fatal(err)
	}
	recs, err := topologytest.NewOutputTopic(d, "third", serde.String(), serde.String()).ReadRecords()
	if err != nil || len(recs) != 2 || recs[0].Value != "A!" || recs[1].Value != "B!" {
		t.Fatalf("got %+v, %v", recs, err)
	}
}

// Writes made through the driver's store handle are committed at once.
func TestStoreHandle(t *testing.T) {
	d := sums(t, topologytest.Config{})
	st, err := topologytest.KeyValueStore[string, int64](d, "totals")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put("a", 100); err != nil {
		t.Fatal(err)
	}
	if _, existed, err := st.PutIfAbsent("b", 1); err != nil || existed {
		t.Fatalf("PutIfAbsent = %v, %v", existed, err)
	}
	if err := st.Delete("b"); err != nil {
		t.Fatal(err)
	}
	var cl []string
	for _, r := range d.Records(d.ChangelogTopic("totals")) {
		cl = append(cl, fmt.Sprintf("%s=%x", r.Key, r.Value))
	}
	if want := []string{"a=0000000000000064", "b=0000000000000001", "b="}; !slices.Equal(cl, want) {
		t.Fatalf("changelog %q, want %q: each write committed at once", cl, want)
	}
	// A failing record does not take the committed writes with it.
	if err := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64()).Pipe("a", -1); err == nil {
		t.Fatal("negative amount accepted")
	}
	if v, _, _ := st.Get("a"); v != 100 {
		t.Fatalf("store a = %d after a failed record, want 100", v)
	}
	badAmounts(t, d)
	got := readAll(t, topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()))
	if !slices.Equal(got, []string{"a=101"}) {
		t.Fatalf("got %q", got)
	}
	if _, err := topologytest.KeyValueStore[string, int64](d, "nope"); !errors.Is(err, statestore.ErrUnknownStore) {
		t.Fatalf("unknown store: %v", err)
	}
	if _, err := topologytest.KeyValueStore[string, string](d, "totals"); err == nil || !strings.Contains(err.Error(), `"totals"`) {
		t.Fatalf("wrongly typed store: %v", err)
	}
}

func TestClosedDriver(t *testing.T) {
	d := sums(t, topologytest.Config{})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.PipeRaw("amounts", nil, nil, nil, time.Time{}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("PipeRaw after Close = %v", err)
	}
	if err := d.AdvanceWallClock(time.Second); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("AdvanceWallClock after Close = %v", err)
	}
}

func TestAdvanceWallClock(t *testing.T) {
	d := sums(t, topologytest.Config{})
	if err := d.AdvanceWallClock(-time.Second); err == nil {
		t.Fatal("moving the wall clock back succeeded")
	}
	if err := d.AdvanceWallClock(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := d.WallClock(); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("WallClock = %v", got)
	}
}

// With a StateDir the driver keeps persistent stores in bbolt files, as the runtime
// does, and a second driver on the same directory finds them.
func TestStateDirPersistsStores(t *testing.T) {
	dir := t.TempDir()
	d := sums(t, topologytest.Config{StateDir: dir, ApplicationID: "persist"})
	badAmounts(t, d)
	badAmounts(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := sums(t, topologytest.Config{StateDir: dir, ApplicationID: "persist"})
	badAmounts(t, d2)
	got := readAll(t, topologytest.NewOutputTopic(d2, "totals", serde.String(), serde.Int64()))
	if !slices.Equal(got, []string{"a=3"}) {
		t.Fatalf("got %q; the total should survive the restart", got)
	}
}

// ReadKeyValueMap reads an output topic as a compacted topic: the last value per key, a
// tombstone removes the key; keys that are pointers or bytes are rendered by content.
func TestReadKeyValueMap(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.Nullable(serde.String()), serde.Nullable(serde.String()), "input")
	topology.AddSink(b, "out", "output", serde.Nullable(serde.String()), serde.Nullable(serde.String()), "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"a", "3"}, {"b", ""}, {"", "x"}} {
		var k, v []byte
		if kv[0] != "" {
			k = []byte(kv[0])
		}
		if kv[1] != "" {
			v = []byte(kv[1])
		}
		if err := d.PipeRaw("input", k, v, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := topologytest.NewOutputTopic(d, "output", serde.Nullable(serde.String()), serde.Nullable(serde.String())).ReadKeyValueMap()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range m {
		got[k] = *v
	}
	if len(got) != 2 || got["a"] != "3" || got["<nil>"] != "x" {
		t.Fatalf("ReadKeyValueMap = %v; want a=3, <nil>=x and b deleted by its tombstone", got)
	}
}

// panicky is a user serde that panics on bytes it did not expect, as a hand-written
// decoder indexing a short record does.
func panicky() serde.Serde[int64] {
	return serde.Funcs("Panicky",
		func(_ string, v int64) ([]byte, error) { return serde.Int64().Serialize("", v) },
		func(_ string, b []byte) (int64, error) {
			return int64(b[0])<<56 | int64(b[1])<<48 | int64(b[2])<<40 | int64(b[3])<<32 |
				int64(b[4])<<24 | int64(b[5])<<16 | int64(b[6])<<8 | int64(b[7]), nil
		})
}

func panickySums(t *testing.T, cfg topologytest.Config) *topologytest.Driver {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "amounts", serde.String(), panicky(), "amounts")
	topology.AddProcessor(b, "sum", func() processor.Processor[string, int64, string, int64] { return &summer{} }, "amounts")
	topology.AddKeyValueStore(b, "totals", serde.String(), serde.Int64(), "sum")
	topology.AddSink(b, "out", "totals", serde.String(), serde.Int64(), "sum")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg.StartTime = start
	d, err := topologytest.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// A deserializer that panics on a record's bytes does not crash the process: the record
// follows the bad-record policy like one the serde rejected.
func TestDeserializerPanicFollowsPolicy(t *testing.T) {
	one := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	t.Run("Fail", func(t *testing.T) {
		d := panickySums(t, topologytest.Config{})
		err := d.PipeRaw("amounts", []byte("a"), []byte{1, 2}, nil, time.Time{})
		var se *serde.Error
		if !errors.Is(err, serde.ErrPanicked) || !errors.As(err, &se) || se.Serde != "Panicky" || se.Topic != "amounts" ||
			!strings.Contains(err.Error(), "index out of range") || !strings.Contains(err.Error(), "value") {
			t.Fatalf("error %v; want a serde.Error of Panicky on amounts wrapping ErrPanicked and the panic", err)
		}
	})
	t.Run("Skip", func(t *testing.T) {
		d := panickySums(t, topologytest.Config{OnDeserializationError: topologytest.Skip})
		for _, v := range [][]byte{one, {1, 2}, one} {
			if err := d.PipeRaw("amounts", []byte("a"), v, nil, time.Time{}); err != nil {
				t.Fatalf("Skip returned %v", err)
			}
		}
		got := readAll(t, topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64()))
		if !slices.Equal(got, []string{"a=1", "a=2"}) {
			t.Fatalf("got %q; the record the serde panicked on should be skipped and the next processed", got)
		}
	})
	t.Run("DeadLetter", func(t *testing.T) {
		d := panickySums(t, topologytest.Config{ApplicationID: "app", OnDeserializationError: topologytest.DeadLetter, DeadLetterTopic: "dlq"})
		if err := d.PipeRaw("amounts", []byte("a"), []byte{7}, nil, time.Time{}); err != nil {
			t.Fatalf("DeadLetter returned %v", err)
		}
		dlq := d.Records("dlq")
		if len(dlq) != 1 || string(dlq[0].Value) != "\x07" {
			t.Fatalf("dead-letter topic holds %v; want the record as it was read", dlq)
		}
	})
}
