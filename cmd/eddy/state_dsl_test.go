package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
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
