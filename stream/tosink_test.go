package stream_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/boltsink"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// A table's updates delivered outside Kafka with ToSink: the node gets its generated
// name, and the target holds every committed update with the input it came from.
func TestToSinkDeliversTableUpdates(t *testing.T) {
	target, err := boltsink.Open(filepath.Join(t.TempDir(), "t.db"), func(r sink.Record[string, int64]) ([]byte, []byte) {
		return fmt.Appendf(nil, "%s=%d", r.Key, r.Value), fmt.Appendf(nil, "%d", r.Offset)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	b := stream.NewBuilder()
	stream.NonNull(stream.ToStream(stream.From(b, str, str, []string{"words"}).GroupByKey(str, str).Count())).ToSink(target)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "EDDY-SINKTO-0000000005") {
		t.Fatalf("no EDDY-SINKTO node in\n%s", d)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "words", str, str)
	for _, w := range []string{"a", "b", "a"} {
		if err := in.Pipe(w, w); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := target.Rows()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s", rows)
	if want := "map[a=1:0 a=2:2 b=1:1]"; got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
}
