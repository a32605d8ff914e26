package task_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// panicky panics on the record "boom" in Process, and in its punctuator at stream time
// 10 s.
type panicky struct {
	ctx processor.Context[string, string]
}

func (p *panicky) Init(ctx processor.Context[string, string]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(10*time.Second, processor.StreamTime, func(now time.Time) error {
		if now.Unix() >= 10 {
			var m map[string]int
			m["x"]++ // a nil-map write: a runtime panic
		}
		return nil
	})
	return err
}

func (p *panicky) Process(rec processor.Record[string, string]) error {
	if rec.Value == "boom" {
		panic("processor bug")
	}
	return p.ctx.Forward(rec)
}

func (p *panicky) Close() error { return nil }

// A processor or punctuator that panics stops the task with an error that wraps
// processor.ErrPanicked and names the node (and the record), instead of crashing the
// process.
func TestPanicsBecomeErrorsNamingTheNode(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "fragile", func() processor.Processor[string, string, string, string] { return &panicky{} }, "in")
	topology.AddSink(b, "out", "output", serde.String(), serde.String(), "fragile")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask(t, topo, &collector{parts: 1}, nil)
	err = tk.Process(raw("input", 2, "k", "boom"))
	var pe *task.ProcessError
	if !errors.As(err, &pe) || !errors.Is(err, processor.ErrPanicked) || pe.Node != "fragile" || pe.Record == nil || pe.Record.Offset != 2 {
		t.Fatalf("a panicking Process gave %v; want a ProcessError of node fragile at offset 2 wrapping ErrPanicked", err)
	}
	if !strings.Contains(err.Error(), "processor bug") {
		t.Errorf("the error does not carry the panic value: %v", err)
	}
	err = tk.Process(raw("input", 11, "k", "fine")) // stream time 11 s: the punctuator panics
	if !errors.As(err, &pe) || !errors.Is(err, processor.ErrPanicked) || pe.Node != "fragile" {
		t.Fatalf("a panicking punctuator gave %v; want a ProcessError of node fragile wrapping ErrPanicked", err)
	}
}
