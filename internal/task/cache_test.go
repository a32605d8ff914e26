package task_test

import (
	"errors"
	"testing"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// holding holds its records back in the task's record cache until the task flushes.
type holding struct {
	ctx  processor.Context[string, string]
	reg  *cache.Registry
	held []processor.Record[string, string]
}

func (p *holding) Init(ctx processor.Context[string, string]) error {
	p.ctx, p.reg = ctx, cache.From(ctx.Context())
	if p.reg == nil {
		return errors.New("the task's context carries no record-cache registry")
	}
	p.reg.Register("held", p, 1<<20)
	return nil
}

func (p *holding) Process(rec processor.Record[string, string]) error {
	p.held = append(p.held, rec)
	return p.reg.Grew(p, 1)
}

func (p *holding) Flush() error {
	held := p.held
	p.reg.Shrank(int64(len(held)))
	p.held = nil
	for _, r := range held {
		if r.Value == "bad" {
			return errors.New("bad value")
		}
		if err := p.ctx.Forward(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *holding) Drop()        { p.held = nil }
func (p *holding) Len() int     { return len(p.held) }
func (p *holding) Close() error { return nil }

// Flush forwards what the record caches hold; Rollback drops it (it belongs to the
// aborted transaction); a flush's error names the task and node, as a processing error.
func TestFlushAndRollbackOfRecordCaches(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "hold", func() processor.Processor[string, string, string, string] { return &holding{} }, "in")
	topology.AddSink(b, "out", "output", serde.String(), serde.String(), "hold")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{parts: 1}
	tk := newTask(t, topo, c, nil)
	if err := tk.Process(raw("input", 1, "k", "a")); err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 0 {
		t.Fatalf("sent %v before the flush", c.sent)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 1 {
		t.Fatalf("sent %v after the flush, want the held record", c.sent)
	}
	if err := tk.Process(raw("input", 2, "k", "b")); err != nil {
		t.Fatal(err)
	}
	tk.Rollback()
	if got := tk.Caches().Bytes(); got != 0 {
		t.Errorf("caches hold %d bytes after Rollback", got)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 1 {
		t.Fatalf("sent %v: the flush after Rollback forwarded the aborted transaction's record", c.sent)
	}
	if err := tk.Process(raw("input", 3, "k", "bad")); err != nil {
		t.Fatal(err)
	}
	var pe *task.ProcessError
	if err := tk.Flush(); !errors.As(err, &pe) || pe.Task != tk.ID() {
		t.Fatalf("flush error %v, want a *task.ProcessError of the task", err)
	}
}
