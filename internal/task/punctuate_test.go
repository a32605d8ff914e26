package task_test

import (
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

// probe is a processor whose Init and Process are given by the test.
type probe struct {
	ctx     processor.Context[string, string]
	init    func(ctx processor.Context[string, string]) error
	process func(ctx processor.Context[string, string], rec processor.Record[string, string]) error
}

func (p *probe) Init(ctx processor.Context[string, string]) error {
	p.ctx = ctx
	if p.init != nil {
		return p.init(ctx)
	}
	return nil
}

func (p *probe) Process(rec processor.Record[string, string]) error {
	if p.process != nil {
		return p.process(p.ctx, rec)
	}
	return nil
}

func (p *probe) Close() error { return nil }

// start is the driver's wall-clock start; 2026-01-01T00:00:00Z is a multiple of every
// interval the tests use, so "aligned to the epoch" and "aligned to start" agree unless
// a test says otherwise.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// run builds input → p (the probe, with store "st") → output and starts a driver.
func run(t *testing.T, p *probe) (*topologytest.Driver, *topologytest.InputTopic[string, string], *topologytest.OutputTopic[string, string]) {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "p", func() processor.Processor[string, string, string, string] { return p }, "in")
	topology.AddKeyValueStore(b, "st", serde.String(), serde.String(), "p")
	topology.AddSink(b, "out", "output", serde.String(), serde.String(), "p")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{StartTime: start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, topologytest.NewInputTopic(d, "input", serde.String(), serde.String()),
		topologytest.NewOutputTopic(d, "output", serde.String(), serde.String())
}

// offsets renders times as offsets from start, for readable comparisons.
func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start)
	}
	return out
}

func advance(t *testing.T, d *topologytest.Driver, dt time.Duration) {
	t.Helper()
	if err := d.AdvanceWallClock(dt); err != nil {
		t.Fatal(err)
	}
}

func pipeAt(t *testing.T, in *topologytest.InputTopic[string, string], at time.Duration) {
	t.Helper()
	if err := in.PipeAt("k", "v", start.Add(at)); err != nil {
		t.Fatal(err)
	}
}

func TestWallClockPunctuation(t *testing.T) {
	var fired []time.Time
	d, in, _ := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		_, err := ctx.Schedule(10*time.Second, processor.WallClockTime, func(now time.Time) error {
			fired = append(fired, now)
			return nil
		})
		return err
	}})
	step := func(dt time.Duration, want ...time.Duration) {
		t.Helper()
		advance(t, d, dt)
		if got := offsets(fired); !slices.Equal(got, want) {
			t.Fatalf("after advancing to %v: fired at %v, want %v", d.WallClock().Sub(start), got, want)
		}
	}
	step(9 * time.Second)                                // not yet: the first fire is one interval after Schedule
	step(1*time.Second, 10*time.Second)                  // exactly due
	step(5*time.Second, 10*time.Second)                  // 15s: nothing
	pipeAt(t, in, time.Hour)                             // records move stream time, not the wall clock
	step(0, 10*time.Second)                              // nothing new at 15s
	step(25*time.Second, 10*time.Second, 40*time.Second) // 40s: 20s and 30s were missed; one fire, not three
	step(9*time.Second, 10*time.Second, 40*time.Second)  // 49s: the next is due at 50s, not 49s
	step(1*time.Second, 10*time.Second, 40*time.Second, 50*time.Second)
	step(95*time.Second, 10*time.Second, 40*time.Second, 50*time.Second, 145*time.Second) // 145s: coalesced, now passed as is
	step(5*time.Second, 10*time.Second, 40*time.Second, 50*time.Second, 145*time.Second, 150*time.Second)
}

func TestStreamTimePunctuation(t *testing.T) {
	var fired []time.Time
	d, in, _ := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		_, err := ctx.Schedule(10*time.Second, processor.StreamTime, func(now time.Time) error {
			if now != ctx.StreamTime() {
				return fmt.Errorf("punctuated at %v, stream time %v", now, ctx.StreamTime())
			}
			fired = append(fired, now)
			return nil
		})
		return err
	}})
	advance(t, d, time.Hour) // the wall clock does not move stream time
	if len(fired) != 0 {
		t.Fatalf("a stream-time punctuator fired without records: %v", offsets(fired))
	}
	step := func(at time.Duration, want ...time.Duration) {
		t.Helper()
		pipeAt(t, in, at)
		if got := offsets(fired); !slices.Equal(got, want) {
			t.Fatalf("after a record at %v: fired at %v, want %v", at, got, want)
		}
	}
	step(3*time.Second, 3*time.Second)                  // the first record fires it at once
	step(9*time.Second, 3*time.Second)                  // next is due at 10s (aligned), not 13s
	step(10*time.Second, 3*time.Second, 10*time.Second) // due
	step(5*time.Second, 3*time.Second, 10*time.Second)  // late record: stream time stays at 10s
	step(19*time.Second, 3*time.Second, 10*time.Second)
	step(47*time.Second, 3*time.Second, 10*time.Second, 47*time.Second) // 20s, 30s, 40s missed: one fire
	step(49*time.Second, 3*time.Second, 10*time.Second, 47*time.Second)
	step(50*time.Second, 3*time.Second, 10*time.Second, 47*time.Second, 50*time.Second)
	advance(t, d, time.Hour)
	if len(fired) != 4 {
		t.Fatalf("wall-clock time fired a stream-time punctuator: %v", offsets(fired))
	}
}

// Like Kafka Streams, stream-time punctuation is aligned to multiples of the interval
// since the Unix epoch, not to the first record.
func TestStreamTimePunctuationAlignedToEpoch(t *testing.T) {
	const interval = 7 * time.Second
	var fired []time.Time
	_, in, _ := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		_, err := ctx.Schedule(interval, processor.StreamTime, func(now time.Time) error {
			fired = append(fired, now)
			return nil
		})
		return err
	}})
	first := time.UnixMilli(1_767_225_603_123) // not a multiple of 7s
	if first.UnixMilli()%interval.Milliseconds() == 0 {
		t.Fatal("pick a first timestamp off the 7s grid")
	}
	// The next multiple of 7s since the epoch after first.
	boundary := time.UnixMilli((first.UnixMilli()/interval.Milliseconds() + 1) * interval.Milliseconds())
	for _, ts := range []time.Time{first, boundary.Add(-time.Millisecond), boundary, boundary.Add(interval - time.Millisecond), boundary.Add(interval)} {
		if err := in.PipeAt("k", "v", ts); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Time{first, boundary, boundary.Add(interval)}
	if !slices.EqualFunc(fired, want, time.Time.Equal) {
		t.Fatalf("fired at %v, want %v (boundary %v)", fired, want, boundary)
	}
}

func TestCancel(t *testing.T) {
	var wall, stream []time.Time
	var streamHandle processor.Cancellable
	d, in, _ := run(t, &probe{
		init: func(ctx processor.Context[string, string]) error {
			// A punctuator that cancels itself after its second fire.
			var h processor.Cancellable
			h, err := ctx.Schedule(time.Second, processor.WallClockTime, func(now time.Time) error {
				wall = append(wall, now)
				if len(wall) == 2 {
					h.Cancel()
				}
				return nil
			})
			if err != nil {
				return err
			}
			streamHandle, err = ctx.Schedule(time.Second, processor.StreamTime, func(now time.Time) error {
				stream = append(stream, now)
				return nil
			})
			return err
		},
		// A record with value "stop" cancels the stream-time punctuator from Process.
		process: func(ctx processor.Context[string, string], rec processor.Record[string, string]) error {
			if rec.Value == "stop" {
				streamHandle.Cancel()
			}
			return nil
		},
	})
	for range 5 {
		advance(t, d, time.Second)
	}
	if got := offsets(wall); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("wall-clock fires %v; want 1s, 2s and none after Cancel", got)
	}
	pipeAt(t, in, 0)
	pipeAt(t, in, 1*time.Second)
	if err := in.PipeAt("k", "stop", start.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	pipeAt(t, in, 10*time.Second)
	// The "stop" record advanced stream time to 5s, but cancelled the punctuator before
	// the punctuation that follows processing.
	if got := offsets(stream); !slices.Equal(got, []time.Duration{0, time.Second}) {
		t.Fatalf("stream-time fires %v; want 0s, 1s and none after Cancel", got)
	}
	streamHandle.Cancel() // cancelling twice is harmless
}

// A punctuator can forward records and write stores; both are committed like the
// output of a record.
func TestPunctuatorForwardsAndWritesStore(t *testing.T) {
	d, _, out := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		st, err := processor.KeyValueStore[string, string](ctx, "st")
		if err != nil {
			return err
		}
		_, err = ctx.Schedule(time.Minute, processor.WallClockTime, func(now time.Time) error {
			if _, ok := ctx.RecordMetadata(); ok {
				return errors.New("a punctuator has no current record")
			}
			tick := now.Sub(start).String()
			if err := st.Put("last", tick); err != nil {
				return err
			}
			return ctx.Forward(processor.Record[string, string]{Key: "tick", Value: tick, Timestamp: now})
		})
		return err
	}})
	advance(t, d, time.Minute)
	advance(t, d, 2*time.Minute)
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%s@%v", r.Key, r.Value, r.Timestamp.Sub(start)))
	}
	if want := []string{"tick=1m0s@1m0s", "tick=3m0s@3m0s"}; !slices.Equal(got, want) {
		t.Fatalf("output %q, want %q", got, want)
	}
	st, err := topologytest.KeyValueStore[string, string](d, "st")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := st.Get("last"); err != nil || !ok || v != "3m0s" {
		t.Fatalf("store last = %q, %v, %v", v, ok, err)
	}
	// Committed: each punctuation wrote one changelog record.
	if cl := d.Records(d.ChangelogTopic("st")); len(cl) != 2 || string(cl[1].Value) != "3m0s" {
		t.Fatalf("changelog %v", cl)
	}
}

func TestPunctuatorErrorNamesNodeAndRollsBack(t *testing.T) {
	fail := false
	d, _, out := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		st, err := processor.KeyValueStore[string, string](ctx, "st")
		if err != nil {
			return err
		}
		_, err = ctx.Schedule(time.Second, processor.WallClockTime, func(now time.Time) error {
			if err := st.Put("k", now.Sub(start).String()); err != nil {
				return err
			}
			if err := ctx.Forward(processor.Record[string, string]{Key: "k", Value: "v", Timestamp: now}); err != nil {
				return err
			}
			if fail {
				return errors.New("disk on fire")
			}
			return nil
		})
		return err
	}})
	advance(t, d, time.Second)
	fail = true
	err := d.AdvanceWallClock(time.Second)
	var pe *topologytest.ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("AdvanceWallClock = %v, want a ProcessError", err)
	}
	if pe.Node != "p" || pe.Task.String() != "0_0" || pe.Record != nil || !strings.Contains(pe.Error(), "disk on fire") || !strings.Contains(pe.Error(), `"p"`) {
		t.Fatalf("error %q (%+v) should name task 0_0 and node p", err, pe)
	}
	// Aborted: the failed punctuation's output and store write are gone.
	recs, _ := out.ReadRecords()
	if len(recs) != 1 {
		t.Fatalf("output has %d records; the failed punctuation's must be rolled back", len(recs))
	}
	st, _ := topologytest.KeyValueStore[string, string](d, "st")
	if v, _, _ := st.Get("k"); v != "1s" {
		t.Fatalf("store k = %q; want the committed 1s", v)
	}
}

// When a punctuator forwards to a child that fails, the error names the child: that is
// where the problem is.
func TestPunctuatorChildErrorNamesChild(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "ticker", func() processor.Processor[string, string, string, string] {
		return &probe{init: func(ctx processor.Context[string, string]) error {
			_, err := ctx.Schedule(time.Second, processor.WallClockTime, func(now time.Time) error {
				return ctx.Forward(processor.Record[string, string]{Key: "k", Value: "v", Timestamp: now})
			})
			return err
		}}
	}, "in")
	topology.AddProcessor(b, "picky", processor.ForEach(func(processor.Record[string, string]) error {
		return errors.New("refused")
	}), "ticker")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.AdvanceWallClock(time.Second)
	var pe *topologytest.ProcessError
	if !errors.As(err, &pe) || pe.Node != "picky" || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("error %v; want a ProcessError naming node picky", err)
	}
}

func TestScheduleErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval time.Duration
		typ      processor.PunctuationType
		fn       processor.Punctuator
		want     string
	}{
		{"zero interval", 0, processor.WallClockTime, func(time.Time) error { return nil }, "must be positive"},
		{"negative interval", -time.Second, processor.StreamTime, func(time.Time) error { return nil }, "must be positive"},
		{"nil punctuator", time.Second, processor.StreamTime, nil, "nil punctuator"},
		{"unknown type", time.Second, processor.PunctuationType(7), func(time.Time) error { return nil }, "unknown punctuation type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var schedErr error
			run(t, &probe{init: func(ctx processor.Context[string, string]) error {
				_, schedErr = ctx.Schedule(c.interval, c.typ, c.fn)
				return nil
			}})
			if schedErr == nil || !strings.Contains(schedErr.Error(), c.want) || !strings.Contains(schedErr.Error(), `"p"`) {
				t.Fatalf("Schedule = %v; want an error naming node p saying %q", schedErr, c.want)
			}
		})
	}
}

// A punctuator scheduled by a punctuator starts counting at the time of that
// punctuation, and does not fire in the same round.
func TestPunctuatorScheduledByPunctuator(t *testing.T) {
	var inner []time.Time
	d, _, _ := run(t, &probe{init: func(ctx processor.Context[string, string]) error {
		var once processor.Cancellable
		var err error
		once, err = ctx.Schedule(10*time.Second, processor.WallClockTime, func(time.Time) error {
			once.Cancel()
			_, err := ctx.Schedule(time.Second, processor.WallClockTime, func(now time.Time) error {
				inner = append(inner, now)
				return nil
			})
			return err
		})
		return err
	}})
	advance(t, d, 10*time.Second)
	if len(inner) != 0 {
		t.Fatalf("the new punctuator fired in the round that scheduled it: %v", offsets(inner))
	}
	advance(t, d, time.Second)
	advance(t, d, time.Second)
	if got := offsets(inner); !slices.Equal(got, []time.Duration{11 * time.Second, 12 * time.Second}) {
		t.Fatalf("inner fired at %v, want 11s, 12s", got)
	}
}
