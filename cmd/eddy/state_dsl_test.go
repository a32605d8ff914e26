package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// The values of a DSL store (stream.Timestamped: a timestamp, then the value) decode
// with --value-serde timestamped:<serde> as value@timestamp, where they printed as
// hex (issue 26). Kills the mutant that does not skip the timestamp (undecodable).
func TestStateDumpTimestampedValues(t *testing.T) {
	topo, err := dsl.Topology()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "wc", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	in := topologytest.NewInputTopic(d, dsl.InputTopic, serde.String(), serde.String())
	if err := in.PipeAt("", "hello world", time.UnixMilli(1000)); err != nil {
		t.Fatal(err)
	}
	if err := in.PipeAt("", "hello", time.UnixMilli(2000)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCmd(t, "state", "dump", "--value-serde", "timestamped:int64", filepath.Join(stateDir, "wc"), dsl.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "hello\t2@2000\n") || !strings.Contains(out, "world\t1@1000\n") || stderr != "" {
		t.Fatalf("dump:\n%s\nstderr: %s", out, stderr)
	}
}

// inspect lists every task when one has a damaged file: the damaged one is marked, with
// what the application does about it, the others are shown as before, and the command
// fails saying how many are damaged (issue 26: it stopped at the first damaged task and
// listed nothing else). Each task shows what its file uses on disk beside its apparent
// size. Kills the mutants "stop at the damaged task" and "no disk usage".
func TestStateInspectListsEveryTaskPastADamagedOne(t *testing.T) {
	appDir := wordcountStateDir(t)
	if err := os.WriteFile(filepath.Join(appDir, "0_0", kvstore.BoltFileName), bytes.Repeat([]byte{0x5a, 0xa5, 0x01}, 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, "state", "inspect", appDir)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 task(s) have a damaged store file") {
		t.Errorf("inspect: %v, want an error counting the damaged task", err)
	}
	for _, want := range []string{"task 0_0", "DAMAGED", "moves this file aside and restores", "task 1_0", "counts", "on disk)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the listing does not say %q:\n%s", want, out)
		}
	}
	out, _, _ = runCmd(t, "state", "inspect", "--json", appDir)
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != 2 || rep.Tasks[0].Damaged == "" || rep.Tasks[1].Damaged != "" || len(rep.Tasks[1].Stores) == 0 {
		t.Fatalf("JSON report: %+v", rep.Tasks)
	}
	// What its blocks take: on most file systems far below the sparse file's size, and
	// never much above it.
	if d := rep.Tasks[1].DiskBytes; d <= 0 || d > rep.Tasks[1].Size+64<<10 {
		t.Errorf("task 1_0: %d bytes on disk for a file of %d", d, rep.Tasks[1].Size)
	}
	t.Logf("task 1_0: %d bytes, %d on disk", rep.Tasks[1].Size, rep.Tasks[1].DiskBytes)
}

// The keys of window and session stores decode with --key-serde window:<serde> and
// session:<serde> as key@start and key@start..end, where they printed as hex (issue
// 26). Kills the mutants "the window suffix not cut" (undecodable) and "a session's
// start and end swapped".
func TestStateDumpWindowedKeys(t *testing.T) {
	b := stream.NewBuilder()
	views := stream.From(b, serde.String(), serde.String(), []string{"views"})
	g := views.GroupByKey(serde.String(), serde.String())
	g.WindowedBy(window.Tumbling(time.Minute, time.Hour)).Count(stream.Materialized("per-minute"))
	g.WindowedBySession(window.Sessions(10*time.Second, time.Hour)).Count(stream.Materialized("sessions"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "views", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	in := topologytest.NewInputTopic(d, "views", serde.String(), serde.String())
	for _, v := range []struct {
		user string
		at   int64
	}{{"ann", 1000}, {"ann", 5000}, {"ann", 61000}, {"bob", 2000}} {
		if err := in.PipeAt(v.user, "/home", time.UnixMilli(v.at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	appDir := filepath.Join(stateDir, "views")
	out, stderr, err := runCmd(t, "state", "dump", "--key-serde", "window:string", "--value-serde", "timestamped:int64", appDir, "per-minute")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ann@0\t2@5000\n", "ann@60000\t1@61000\n", "bob@0\t1@2000\n"} {
		if !strings.Contains(out, want) || stderr != "" {
			t.Errorf("window store dump: want a line %q:\n%s\nstderr: %s", want, out, stderr)
		}
	}
	out, stderr, err = runCmd(t, "state", "dump", "--key-serde", "session:string", "--value-serde", "int64", appDir, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ann@1000..5000\t2\n", "ann@61000..61000\t1\n", "bob@2000..2000\t1\n"} {
		if !strings.Contains(out, want) || stderr != "" {
			t.Errorf("session store dump: want a line %q:\n%s\nstderr: %s", want, out, stderr)
		}
	}
	// A plain key serde on a window store still dumps, and says why it could not decode.
	out, stderr, err = runCmd(t, "state", "dump", "--key-serde", "window:int64", appDir, "per-minute")
	if err != nil || !strings.Contains(stderr, "could not be decoded as window:int64") {
		t.Errorf("window:int64 on string keys: err %v, stderr %q, out:\n%s", err, stderr, out)
	}
}
