package eddy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// A record that reaches a windowed aggregation after its window's grace period is
// dropped and counted in eddy_dropped_records_total{reason="late"} (issue #15), once it
// is committed.
func TestLateRecordsAreCounted(t *testing.T) {
	c := kafkatest.Embedded(t)
	in, out := c.Unique("views"), c.Unique("per-minute")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctxT(t), topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := stream.NewBuilder(stream.NoCaching())
	views := stream.From(b, serde.String(), serde.String(), []string{in})
	perMinute := views.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(time.Minute, 10*time.Second)).Count()
	stream.ToStream(perMinute).To(out, window.TimeWindowedSerde(serde.String(), time.Minute), serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := eddy.Config{ApplicationID: c.Unique("late"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t), Metrics: reg}
	inst := start(t, topo, cfg)
	base := time.Unix(1_700_000_000, 0).Truncate(time.Minute)
	// 0:10 and 1:05 are in time; 0:40 arrives at stream time 1:15, after its window
	// [0:00, 1:00) closed at 1:10: late. 0:20 too.
	var msgs []*sarama.ProducerMessage
	for _, at := range []time.Duration{10 * time.Second, 65 * time.Second, 75 * time.Second, 40 * time.Second, 20 * time.Second} {
		msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder("ann"), Value: sarama.StringEncoder("/"), Timestamp: base.Add(at)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Produce(ctx, in, msgs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "two late records counted", func() (bool, error) {
		if err, done := inst.exited(); done {
			return false, fmt.Errorf("app stopped: %v", err)
		}
		return droppedLate(t, reg) == 2, nil
	})
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}

func droppedLate(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "eddy_dropped_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "late" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
