package eddy_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// messageWatch is a slog handler that counts the records whose message contains a text.
type messageWatch struct {
	slog.Handler
	text string
	seen *atomic.Int64
}

func (w messageWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w messageWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, w.text) {
		w.seen.Add(1)
	}
	if !w.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return w.Handler.Handle(ctx, r)
}
func (w messageWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return messageWatch{w.Handler.WithAttrs(as), w.text, w.seen}
}
func (w messageWatch) WithGroup(g string) slog.Handler {
	return messageWatch{w.Handler.WithGroup(g), w.text, w.seen}
}

// Per-source offset reset: of two topics that hold records before the application first
// runs, the one read from the latest offset skips them and the one read from the
// earliest (the default) processes them; both process what is written later. Once the
// latest-reset topic has a committed offset, a restart goes on from it: records written
// while the application was down are processed.
func TestPerSourceOffsetReset(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		early, late, out := c.Unique("early"), c.Unique("late"), c.Unique("reset-out")
		for _, topic := range []string{early, late, out} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		produce := func(topic, value string) {
			t.Helper()
			if err := kafkatest.ProduceTyped(ctx, c, topic, serde.String(), serde.String(), processor.Record[string, string]{Key: "k", Value: value}); err != nil {
				t.Fatal(err)
			}
		}
		produce(early, "old-early")
		produce(late, "old-late")

		b := stream.NewBuilder()
		e := stream.From(b, serde.String(), serde.String(), []string{early})
		l := stream.FromConsumed(b, stream.Consume(serde.String(), serde.String()).WithOffsetReset(topology.Latest), []string{late})
		e.Merge([]stream.Stream[string, string]{l}).To(out, serde.String(), serde.String())
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		var resets atomic.Int64
		cfg := eddy.Config{ApplicationID: c.Unique("reset"), Brokers: c.Addrs(), StateDir: t.TempDir(),
			Logger: slog.New(messageWatch{testLogger(t).Handler(), "offset reset latest", &resets})}
		outputs := func() []string {
			recs, err := kafkatest.ReadCommittedTyped(ctx, c, out, serde.String(), serde.String())
			if err != nil {
				t.Fatal(err)
			}
			var vs []string
			for _, r := range recs {
				vs = append(vs, r.Value)
			}
			slices.Sort(vs)
			return vs
		}
		waitOutput := func(in *instance, want ...string) {
			t.Helper()
			waitFor(t, time.Minute, strings.Join(want, ", "), func() (bool, error) {
				if err, done := in.exited(); done {
					t.Fatalf("app stopped: %v", err)
				}
				return len(outputs()) >= len(want), nil
			})
			if got := outputs(); !slices.Equal(got, want) {
				t.Fatalf("output %v, want %v", got, want)
			}
		}

		in := start(t, topo, cfg)
		// The claim of the latest-reset topic found no committed offset and started at
		// the partition's end.
		waitFor(t, time.Minute, "the latest-reset claim to start", func() (bool, error) { return resets.Load() > 0, nil })
		produce(early, "new-early")
		produce(late, "new-late")
		waitOutput(in, "new-early", "new-late", "old-early")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}

		// Written while the application is down: the committed offset covers it.
		produce(late, "while-down")
		before := resets.Load()
		in = start(t, topo, cfg)
		waitOutput(in, "new-early", "new-late", "old-early", "while-down")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		if n := resets.Load() - before; n != 0 {
			t.Errorf("the restart reset %d claims to the latest offset; the partition had a committed offset", n)
		}
	})
}
