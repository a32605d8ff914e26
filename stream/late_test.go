package stream

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// Late records are warned of, once per operator every lateWarnEvery with the count
// since the last warning, naming the window, the record's time and the stream time
// (issue 26: they were dropped at debug level, so a backfill lost half its records
// silently). Kills the mutants "debug level" (no WARN line), "no rate limit" (a line per
// record) and "the count not reset".
func TestLateRecordsAreWarnedOfRateLimited(t *testing.T) {
	var logs bytes.Buffer
	b := NewBuilder(NoCaching())
	From(b, serde.String(), serde.String(), []string{"in"}).GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 2*time.Second)).Count(Named("counts"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := func(ms int64) {
		if err := d.PipeRaw("in", []byte("k"), []byte("v"), nil, time.UnixMilli(ms)); err != nil {
			t.Fatal(err)
		}
	}
	pipe(100_000) // stream time 100 s: the window [0 s, 10 s) closed at 12 s
	for range 5 { // a backfill of old records
		pipe(1_000)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d warning lines for 5 late records, want 1 (rate-limited):\n%s", len(lines), logs.String())
	}
	for _, want := range []string{"level=WARN", "dropping a late record", "timestamp=1000", "window=", "observed_stream_time=100000", "dropped_since_last_warning=1", "grace"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the warning does not say %q: %s", want, lines[0])
		}
	}
}

func TestLateWarnerCountsSinceTheLastWarning(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	now := time.Unix(0, 0)
	w := lateWarner{now: func() time.Time { return now }}
	w.drop(logger, "late")
	for range 4 {
		now = now.Add(time.Second)
		w.drop(logger, "late")
	}
	now = now.Add(lateWarnEvery)
	w.drop(logger, "late")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "dropped_since_last_warning=1") || !strings.Contains(lines[1], "dropped_since_last_warning=5") {
		t.Fatalf("warnings:\n%s\nwant two, counting 1 then 5", logs.String())
	}
}
