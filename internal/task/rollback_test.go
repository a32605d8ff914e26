package task_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// ticking forwards a record per stream-time second (a stream-time punctuator scheduled in
// Init), per wall-clock second (scheduled by the first record), and cancels the
// stream-time punctuator at the record "stop".
type ticking struct {
	ctx    processor.Context[string, string]
	stream processor.Cancellable
	wall   bool
}

func (p *ticking) Init(ctx processor.Context[string, string]) (err error) {
	p.ctx = ctx
	p.stream, err = ctx.Schedule(time.Second, processor.StreamTime, func(now time.Time) error {
		return ctx.Forward(processor.Record[string, string]{Key: "stream", Value: fmt.Sprint(now.Unix()), Timestamp: now})
	})
	return err
}

func (p *ticking) Process(rec processor.Record[string, string]) error {
	if rec.Value == "stop" {
		p.stream.Cancel()
	}
	if !p.wall {
		p.wall = true
		_, err := p.ctx.Schedule(time.Second, processor.WallClockTime, func(now time.Time) error {
			return p.ctx.Forward(processor.Record[string, string]{Key: "wall", Value: fmt.Sprint(now.Unix()), Timestamp: now})
		})
		return err
	}
	return nil
}

func (p *ticking) Close() error { return nil }

// tickingTask runs a ticking processor from topic input to output; step processes one
// record of it at offset off (its timestamp, off seconds).
func tickingTask(t *testing.T) (*task.Task, *collector, func(off int64, value string)) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	p := &ticking{}
	topology.AddProcessor(b, "tick", func() processor.Processor[string, string, string, string] { return p }, "in")
	topology.AddSink(b, "out", "output", serde.String(), serde.String(), "tick")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{parts: 1}
	tk := newTask(t, topo, c, nil)
	return tk, c, func(off int64, value string) {
		t.Helper()
		if err := tk.Process(raw("input", off, "k", value)); err != nil {
			t.Fatal(err)
		}
	}
}

// Rollback returns stream time, the wall-clock time and the punctuation schedule to the
// last commit, so a replay of an aborted transaction's input fires the same punctuations
// as the first pass and sees the same stream time.
func TestRollbackReplaysTimeAndPunctuations(t *testing.T) {
	tk, c, step := tickingTask(t)
	step(1, "a") // fires stream 1; schedules the wall-clock punctuator
	tk.Committed()
	committedSent := len(c.sent)
	wall0 := time.Now()

	// The transaction: stream time 2 (fires 2), 4 (cancels the stream punctuator before it
	// fires), a wall-clock round (fires), 6 (nothing: cancelled).
	pass := func() []string {
		from := len(c.sent)
		step(2, "b")
		step(4, "stop")
		if err := tk.PunctuateWallClock(wall0.Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		step(6, "c") // the stream punctuator is cancelled: nothing
		return slices.Clone(c.sent[from:])
	}
	first := pass()
	if tk.StreamTime().Unix() != 6 {
		t.Fatalf("stream time after the transaction: %v", tk.StreamTime())
	}
	tk.Rollback()
	if got := tk.StreamTime().Unix(); got != 1 {
		t.Errorf("stream time after Rollback = %d s, want the committed 1 s", got)
	}
	replay := pass()
	if len(first) != 2 || !slices.Equal(first, replay) {
		t.Errorf("the replay after Rollback sent %v, the first pass %v; want the same 2 records (stream 2 and one wall-clock)", replay, first)
	}
	if committedSent != 1 {
		t.Errorf("before the transaction: %d records, want 1", committedSent)
	}
}

// A sealed transaction (the overlapped commit) commits the time state it was sealed
// with: a rollback of the open transaction after it replays from the seal, and a
// rollback while sealed from the last commit before it.
func TestRollbackAcrossASeal(t *testing.T) {
	tk, c, step := tickingTask(t)
	stream := func(want int64, when string) {
		t.Helper()
		if got := tk.StreamTime().Unix(); got != want {
			t.Fatalf("%s: stream time %d s, want %d s", when, got, want)
		}
	}
	step(1, "a")
	tk.Committed()
	step(2, "b")
	tk.Seal() // the transaction at 2 commits while processing goes on
	first := len(c.sent)
	step(4, "c")
	firstPass := slices.Clone(c.sent[first:])
	tk.Committed() // it committed
	stream(4, "after the sealed transaction committed")
	tk.Rollback() // the open transaction aborted
	stream(2, "after the open transaction's rollback")
	from := len(c.sent)
	step(4, "c")
	if got := c.sent[from:]; len(got) != 1 || !slices.Equal(got, firstPass) {
		t.Fatalf("the replay from the seal at 2 s to 4 s sent %v, the first pass %v; want the same punctuation", got, firstPass)
	}
	tk.Seal()
	step(6, "d")
	tk.Rollback() // the sealed transaction aborted: both go, back to 2
	stream(2, "after a rollback while sealed")
}
