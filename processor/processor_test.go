package processor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pipeline runs input → node → output with the given supplier for node.
func pipeline[VOut any](t *testing.T, s processor.Supplier[string, string, string, VOut], out serde.Serde[VOut]) (*topologytest.InputTopic[string, string], *topologytest.OutputTopic[string, VOut]) {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "node", s, "in")
	topology.AddSink(b, "out", "output", serde.String(), out, "node")
	d := start1(t, b)
	return topologytest.NewInputTopic(d, "input", serde.String(), serde.String()), topologytest.NewOutputTopic(d, "output", serde.String(), out)
}

func start1(t *testing.T, b *topology.Builder) *topologytest.Driver {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{StartTime: start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func read[V any](t *testing.T, out *topologytest.OutputTopic[string, V]) []string {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%v", r.Key, r.Value))
	}
	return got
}

func pipe(t *testing.T, in *topologytest.InputTopic[string, string], kvs ...string) {
	t.Helper()
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := in.Pipe(kvs[i], kvs[i+1]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMap(t *testing.T) {
	in, out := pipeline(t, processor.Map(func(r processor.Record[string, string]) (processor.Record[string, int64], error) {
		return processor.WithKeyValue(r, strings.ToUpper(r.Key), int64(len(r.Value))), nil
	}), serde.Int64())
	pipe(t, in, "a", "xyz", "b", "")
	if got := read(t, out); !slices.Equal(got, []string{"A=3", "B=0"}) {
		t.Fatalf("got %q", got)
	}
}

func TestMapValues(t *testing.T) {
	in, out := pipeline(t, processor.MapValues[string](func(v string) (string, error) { return v + v, nil }), serde.String())
	pipe(t, in, "k", "ab")
	if got := read(t, out); !slices.Equal(got, []string{"k=abab"}) {
		t.Fatalf("got %q", got)
	}
}

func TestFilter(t *testing.T) {
	in, out := pipeline(t, processor.Filter(func(r processor.Record[string, string]) bool { return r.Value != "drop" }), serde.String())
	pipe(t, in, "a", "keep", "b", "drop", "c", "keep")
	if got := read(t, out); !slices.Equal(got, []string{"a=keep", "c=keep"}) {
		t.Fatalf("got %q", got)
	}
}

func TestFlatMap(t *testing.T) {
	in, out := pipeline(t, processor.FlatMap(func(r processor.Record[string, string]) ([]processor.Record[string, string], error) {
		var recs []processor.Record[string, string]
		for i, f := range strings.Fields(r.Value) {
			recs = append(recs, processor.WithKeyValue(r, fmt.Sprint(r.Key, i), f))
		}
		return recs, nil
	}), serde.String())
	pipe(t, in, "k", "x y z", "e", "")
	if got := read(t, out); !slices.Equal(got, []string{"k0=x", "k1=y", "k2=z"}) {
		t.Fatalf("got %q", got)
	}
}

func TestForEachForwardsNothing(t *testing.T) {
	var seen []string
	in, out := pipeline(t, processor.ForEach(func(r processor.Record[string, string]) error {
		seen = append(seen, r.Key+"="+r.Value)
		return nil
	}), serde.String())
	pipe(t, in, "a", "1", "b", "2")
	if !slices.Equal(seen, []string{"a=1", "b=2"}) {
		t.Fatalf("ForEach saw %q", seen)
	}
	if got := read(t, out); len(got) != 0 {
		t.Fatalf("ForEach forwarded %q", got)
	}
}

// A helper's error stops the record and names the node.
func TestHelperErrorsNameNode(t *testing.T) {
	boom := errors.New("boom")
	for name, s := range map[string]processor.Supplier[string, string, string, string]{
		"Map": processor.Map(func(processor.Record[string, string]) (processor.Record[string, string], error) {
			return processor.Record[string, string]{}, boom
		}),
		"MapValues": processor.MapValues[string](func(string) (string, error) { return "", boom }),
		"FlatMap": processor.FlatMap(func(processor.Record[string, string]) ([]processor.Record[string, string], error) {
			return nil, boom
		}),
		"ForEach": processor.ForEach(func(processor.Record[string, string]) error { return boom }),
	} {
		t.Run(name, func(t *testing.T) {
			in, _ := pipeline(t, s, serde.String())
			err := in.Pipe("k", "v")
			var pe *topologytest.ProcessError
			if !errors.Is(err, boom) || !errors.As(err, &pe) || pe.Node != "node" {
				t.Fatalf("Pipe = %v; want boom in a ProcessError naming node", err)
			}
		})
	}
}

// Record helpers keep the timestamp and headers.
func TestWithValueKeepsMetadata(t *testing.T) {
	r := processor.Record[string, int]{Key: "k", Value: 1, Timestamp: start, Headers: []processor.Header{{Key: "h", Value: []byte("v")}}}
	v := processor.WithValue(r, "one")
	if v.Key != "k" || v.Value != "one" || !v.Timestamp.Equal(start) || len(v.Headers) != 1 || v.Headers[0].Key != "h" {
		t.Fatalf("WithValue = %+v", v)
	}
	kv := processor.WithKeyValue(r, 7, 2.5)
	if kv.Key != 7 || kv.Value != 2.5 || !kv.Timestamp.Equal(start) || len(kv.Headers) != 1 {
		t.Fatalf("WithKeyValue = %+v", kv)
	}
}

func TestTaskID(t *testing.T) {
	id := processor.TaskID{Subtopology: 3, Partition: 12}
	if id.String() != "3_12" {
		t.Fatalf("String = %q", id)
	}
	back, err := processor.ParseTaskID("3_12")
	if err != nil || back != id {
		t.Fatalf("ParseTaskID = %v, %v", back, err)
	}
	for _, bad := range []string{"", "3", "3_", "_1", "3-12", "3_12x", "03_12", "a_b", "-1_2", "1_-2", " 1_2"} {
		if _, err := processor.ParseTaskID(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ParseTaskID(%q) = %v; want an error quoting the input", bad, err)
		}
	}
}

func TestPunctuationTypeString(t *testing.T) {
	if processor.StreamTime.String() != "stream-time" || processor.WallClockTime.String() != "wall-clock" {
		t.Fatal(processor.StreamTime.String(), processor.WallClockTime.String())
	}
}

// ctxProbe records what its Context says while processing.
type ctxProbe struct {
	ctx  processor.Context[string, string]
	seen *[]string
	do   func(ctx processor.Context[string, string], rec processor.Record[string, string]) error
}

func (p *ctxProbe) Init(ctx processor.Context[string, string]) error {
	p.ctx = ctx
	if _, ok := ctx.RecordMetadata(); ok {
		return errors.New("RecordMetadata in Init")
	}
	return nil
}

func (p *ctxProbe) Process(rec processor.Record[string, string]) error {
	md, ok := p.ctx.RecordMetadata()
	if !ok {
		return errors.New("no RecordMetadata in Process")
	}
	*p.seen = append(*p.seen, fmt.Sprintf("%s %s/%d@%d task=%s app=%s stream=%v",
		p.ctx.NodeName(), md.Topic, md.Partition, md.Offset, p.ctx.TaskID(), p.ctx.ApplicationID(), p.ctx.StreamTime().Sub(start)))
	if p.do != nil {
		return p.do(p.ctx, rec)
	}
	return p.ctx.Forward(rec)
}

func (p *ctxProbe) Close() error { return nil }

func TestContextMetadata(t *testing.T) {
	var seen []string
	var ctxs []processor.Context[string, string]
	supplier := func() processor.Processor[string, string, string, string] {
		p := &ctxProbe{seen: &seen}
		p.do = func(ctx processor.Context[string, string], rec processor.Record[string, string]) error {
			ctxs = append(ctxs, ctx)
			if ctx.Logger() == nil || ctx.Context().Err() != nil {
				return errors.New("no logger, or a context cancelled while the task runs")
			}
			return ctx.Forward(rec)
		}
		return p
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "first", supplier, "in")
	topology.AddRepartition(b, "rekeyed", serde.String(), serde.String(), "first")
	topology.AddProcessor(b, "second", supplier, "rekeyed")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "meta-app", StartTime: start})
	if err != nil {
		t.Fatal(err)
	}
	in := topologytest.NewInputTopic(d, "input", serde.String(), serde.String())
	if err := in.PipeAt("a", "1", start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := in.PipeAt("b", "2", start.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"first input/0@0 task=0_0 app=meta-app stream=1s",
		"second meta-app-rekeyed-repartition/0@0 task=1_0 app=meta-app stream=1s",
		"first input/0@1 task=0_0 app=meta-app stream=3s",
		"second meta-app-rekeyed-repartition/0@1 task=1_0 app=meta-app stream=3s",
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range ctxs {
		if !errors.Is(ctx.Context().Err(), context.Canceled) {
			t.Fatalf("task context not cancelled on close: %v", ctx.Context().Err())
		}
	}
}

// router forwards each record to the child named by its value, or to all with "*".
func router() processor.Processor[string, string, string, string] {
	var seen []string
	return &ctxProbe{seen: &seen, do: func(ctx processor.Context[string, string], rec processor.Record[string, string]) error {
		if rec.Value == "*" {
			return ctx.Forward(rec)
		}
		return ctx.Forward(rec, strings.Split(rec.Value, ",")...)
	}}
}

func TestForwardToNamedChildren(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "router", router, "in")
	topology.AddSink(b, "to-a", "topic-a", serde.String(), serde.String(), "router")
	topology.AddSink(b, "to-b", "topic-b", serde.String(), serde.String(), "router")
	d := start1(t, b)
	in := topologytest.NewInputTopic(d, "input", serde.String(), serde.String())
	a := topologytest.NewOutputTopic(d, "topic-a", serde.String(), serde.String())
	bb := topologytest.NewOutputTopic(d, "topic-b", serde.String(), serde.String())
	pipe(t, in, "1", "to-a", "2", "to-b", "3", "*", "4", "to-b,to-a")
	if got := read(t, a); !slices.Equal(got, []string{"1=to-a", "3=*", "4=to-b,to-a"}) {
		t.Errorf("topic-a got %q", got)
	}
	if got := read(t, bb); !slices.Equal(got, []string{"2=to-b", "3=*", "4=to-b,to-a"}) {
		t.Errorf("topic-b got %q", got)
	}

	err := in.Pipe("5", "to-a,nobody")
	var pe *topologytest.ProcessError
	if !errors.Is(err, processor.ErrUnknownChild) || !errors.As(err, &pe) || pe.Node != "router" {
		t.Fatalf("Forward to an unknown child = %v; want ErrUnknownChild from node router", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"nobody"`) || !strings.Contains(msg, "to-a") || !strings.Contains(msg, "to-b") {
		t.Errorf("error %q should name the unknown child and list the real ones", msg)
	}
	// The record failed as a whole: what it forwarded to to-a first is rolled back.
	if got := read(t, a); len(got) != 0 {
		t.Errorf("topic-a got %q from a failed record", got)
	}
}

type storeUser struct {
	ask func(ctx processor.Context[string, string]) error
}

func (s *storeUser) Init(ctx processor.Context[string, string]) error { return s.ask(ctx) }
func (s *storeUser) Process(processor.Record[string, string]) error   { return nil }
func (s *storeUser) Close() error                                     { return nil }

func TestStateStoreAccess(t *testing.T) {
	build := func(ask func(ctx processor.Context[string, string]) error) error {
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.String(), serde.String(), "input")
		topology.AddProcessor(b, "owner", func() processor.Processor[string, string, string, string] {
			return &storeUser{ask: func(processor.Context[string, string]) error { return nil }}
		}, "in")
		topology.AddProcessor(b, "asker", func() processor.Processor[string, string, string, string] { return &storeUser{ask: ask} }, "in")
		topology.AddKeyValueStore(b, "mine", serde.String(), serde.Int64(), "asker")
		topology.AddKeyValueStore(b, "theirs", serde.String(), serde.Int64(), "owner")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		d, err := topologytest.New(topo, topologytest.Config{})
		if err == nil {
			_ = d.Close()
		}
		return err
	}

	// Its own store, typed as declared.
	if err := build(func(ctx processor.Context[string, string]) error {
		s, err := processor.KeyValueStore[string, int64](ctx, "mine")
		if err != nil {
			return err
		}
		if s.Name() != "mine" {
			return fmt.Errorf("got store %q", s.Name())
		}
		return s.Put("x", 1)
	}); err != nil {
		t.Fatalf("own store: %v", err)
	}

	// Another processor's store, and one that exists nowhere.
	for _, name := range []string{"theirs", "nowhere"} {
		err := build(func(ctx processor.Context[string, string]) error {
			_, err := processor.KeyValueStore[string, int64](ctx, name)
			return err
		})
		var pe *topologytest.ProcessError
		if !errors.Is(err, processor.ErrStoreNotAttached) || !errors.As(err, &pe) || pe.Node != "asker" {
			t.Fatalf("store %q: %v; want ErrStoreNotAttached from node asker", name, err)
		}
		if !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), "mine") {
			t.Errorf("error %q should name the store asked for and list the attached ones", err)
		}
	}

	// Its own store with other types.
	err := build(func(ctx processor.Context[string, string]) error {
		_, err := processor.KeyValueStore[string, string](ctx, "mine")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), `"mine"`) || !strings.Contains(err.Error(), "KeyValueStore[string, string]") {
		t.Fatalf("wrongly typed store: %v", err)
	}
}

// Init errors fail the driver's start and name the node.
func TestInitErrorNamesNode(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "grumpy", func() processor.Processor[string, string, string, string] {
		return &storeUser{ask: func(processor.Context[string, string]) error { return errors.New("will not start") }}
	}, "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = topologytest.New(topo, topologytest.Config{})
	var pe *topologytest.ProcessError
	if !errors.As(err, &pe) || pe.Node != "grumpy" || !strings.Contains(err.Error(), "will not start") {
		t.Fatalf("New = %v; want a ProcessError naming grumpy", err)
	}
}

// Each task gets its own processor instance from the supplier.
func TestSupplierCalledPerTask(t *testing.T) {
	calls := 0
	supplier := func() processor.Processor[string, string, string, string] {
		calls++
		return &storeUser{ask: func(processor.Context[string, string]) error { return nil }}
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "p", supplier, "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d, err := topologytest.New(topo, topologytest.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_ = d.Close()
	}
	if calls != 2 {
		t.Fatalf("supplier called %d times for 2 tasks", calls)
	}
}
