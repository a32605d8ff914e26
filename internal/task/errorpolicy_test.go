package task_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

func fragileTopology(t *testing.T) *topology.Topology {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "fragile", func() processor.Processor[string, string, string, string] { return &panicky{} }, "in")
	topology.AddProcessor(b, "picky", processor.MapValues[string](func(v string) (string, error) {
		if v == "bad" {
			return "", errors.New("bad is refused")
		}
		return v, nil
	}), "fragile")
	topology.AddSink(b, "out", "output", serde.String(), serde.String(), "picky")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// Config.OnProcessingError (KIP-1033): under Skip a record whose processor returned an
// error or panicked is passed over and the next is processed; under DeadLetter it is
// written, as read, to the dead-letter topic with the failing node and the error; a
// sink's failure (here the producer's) is never skipped, whatever the policy. Kills the
// mutants "policy ignored", "the dead letter names the source, not the failing node"
// and "a sink's error skipped".
func TestProcessingErrorPolicy(t *testing.T) {
	var told []task.ErrorPolicy
	onBad := func(c *task.Config) {
		c.OnBadRecord = func(p task.ErrorPolicy, _ graph.RawRecord, _ error) { told = append(told, p) }
	}
	t.Run("Skip", func(t *testing.T) {
		told = nil
		c := &collector{parts: 1}
		tk := newTask(t, fragileTopology(t), c, func(cfg *task.Config) { cfg.OnProcessingError = task.Skip; onBad(cfg) })
		for i, v := range []string{"one", "boom", "bad", "two"} {
			if err := tk.Process(raw("input", int64(i), "k", v)); err != nil {
				t.Fatalf("record %q: %v", v, err)
			}
		}
		if got := strings.Join(c.sent, ","); got != "output/0 k=one,output/0 k=two" {
			t.Fatalf("sent %s; the failing records should be skipped and the others written", got)
		}
		if len(told) != 2 || told[0] != task.Skip {
			t.Errorf("OnBadRecord told %v, want two skips", told)
		}
	})
	t.Run("DeadLetter", func(t *testing.T) {
		c := &collector{parts: 1}
		tk := newTask(t, fragileTopology(t), c, func(cfg *task.Config) {
			cfg.OnProcessingError, cfg.DeadLetterTopic = task.DeadLetter, "dlq"
		})
		for i, v := range []string{"boom", "bad"} {
			if err := tk.Process(raw("input", int64(i), "k", v)); err != nil {
				t.Fatalf("record %q: %v", v, err)
			}
		}
		if got := strings.Join(c.sent, ","); got != "dlq/0 k=boom,dlq/0 k=bad" {
			t.Fatalf("sent %s; want both records in the dead-letter topic as read", got)
		}
		if len(c.headers) != 2 || c.headers[0][task.HeaderDLQNode] != "fragile" || c.headers[1][task.HeaderDLQNode] != "picky" ||
			!strings.Contains(c.headers[0][task.HeaderDLQError], "panicked") || !strings.Contains(c.headers[1][task.HeaderDLQError], "bad is refused") ||
			c.headers[1][task.HeaderDLQOffset] != "1" {
			t.Fatalf("dead-letter headers %v", c.headers)
		}
	})
	t.Run("a sink's error is not skipped", func(t *testing.T) {
		sendErr := errors.New("producer: send (fatal): TOPIC_AUTHORIZATION_FAILED")
		c := &collector{parts: 1, fail: sendErr}
		tk := newTask(t, fragileTopology(t), c, func(cfg *task.Config) { cfg.OnProcessingError = task.Skip })
		err := tk.Process(raw("input", 0, "k", "one"))
		var pe *task.ProcessError
		if !errors.Is(err, sendErr) || !errors.As(err, &pe) || pe.Node != "out" {
			t.Fatalf("a failing sink under Skip gave %v; want the sink's error", err)
		}
	})
}
