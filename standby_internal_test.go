package eddy

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/processor"
)

// taskOffsets reports a task dir left from earlier by the checkpoints in its file (the
// counts store's: the word count's one kept store), and leaves out a dir without
// checkpoints and the tasks without kept stores.
func TestTaskOffsetsReadsLeftTaskDirs(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	g := graph.Of(topo)
	dir := t.TempDir()
	rt := &runtime{g: g, appDir: dir, registry: newTaskRegistry(), logger: slog.New(slog.DiscardHandler), assignor: newAssignor(g, "app")}
	be, err := kvstore.OpenBolt(filepath.Join(dir, "1_1"), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Write(kvstore.Batch{Writes: map[string][]kvstore.Entry{wordcount.StoreName: {{Key: []byte("fox"), Value: make([]byte, 8)}}}, Checkpoints: map[string]int64{wordcount.StoreName: 42}}); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	empty, err := kvstore.OpenBolt(filepath.Join(dir, "1_2"), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "0_1"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := rt.taskOffsets()
	want := map[processor.TaskID]int64{{Subtopology: 1, Partition: 1}: 42}
	if !maps.Equal(got, want) {
		t.Fatalf("taskOffsets() = %v; want %v", got, want)
	}
}
