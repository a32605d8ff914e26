package topologytest_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy/internal/boltsink"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// The driver runs a sink outside Kafka as the runtime does: each record's commit
// prepares and then commits its transaction, and a record whose processing fails
// rolls its transaction back, so the target holds exactly the committed records.
func TestDriverCommitsAndRollsBackSinkTransactions(t *testing.T) {
	target, err := boltsink.Open(filepath.Join(t.TempDir(), "t.db"), func(r sink.Record[string, int64]) ([]byte, []byte) {
		return fmt.Appendf(nil, "%s=%d", r.Key, r.Value), fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.Int64(), "numbers")
	// The sink writes first; a negative value then fails the record in "check", after
	// its row went into the open sink transaction.
	topology.AddSinkTo(b, "db", sink.Target[string, int64](target), "in")
	topology.AddProcessor(b, "check", processor.ForEach(func(r processor.Record[string, int64]) error {
		if r.Value < 0 {
			return errors.New("negative")
		}
		return nil
	}), "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "numbers", serde.String(), serde.Int64())
	if err := in.Pipe("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := in.Pipe("b", -1); err == nil {
		t.Fatal("the failing record did not fail")
	}
	if err := in.Pipe("c", 3); err != nil {
		t.Fatal(err)
	}
	rows, err := target.Rows()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a=1": "numbers/0/0", "c=3": "numbers/0/2"}
	if fmt.Sprint(rows) != fmt.Sprint(map[string][]byte{"a=1": []byte(want["a=1"]), "c=3": []byte(want["c=3"])}) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	if p, err := target.Pending(t.Context(), "eddy:"); err != nil || len(p) > 0 {
		t.Fatalf("pending %v, %v: want none", p, err)
	}
}
