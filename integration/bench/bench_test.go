//go:build linux

package main

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// The rows find a word count's repartition topics in its topology: the processor-API
// version's is <app>-words-repartition; the DSL's is whatever the DSL names it, and
// runs without a repartition topic have none (a missing topic would end an exactly-once
// run before the count sub-topology committed).
func TestRepartitionTopicsComeFromTheTopology(t *testing.T) {
	for _, tc := range []struct {
		topology string
		want     int
	}{{"wordcount", 1}, {"wordcount-dsl", 1}, {"passthrough", 0}, {"count", 0}} {
		spec := &childSpec{Topology: tc.topology, Input: "in", Output: "out", Group: "app"}
		got, err := repartitionTopics(spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.topology, err)
		}
		if len(got) != tc.want {
			t.Fatalf("%s: repartition topics %q, want %d", tc.topology, got, tc.want)
		}
		for _, topic := range got {
			if !strings.HasPrefix(topic, "app-") || !strings.HasSuffix(topic, "-repartition") {
				t.Errorf("%s: repartition topic %q is not <app>-<name>-repartition", tc.topology, topic)
			}
		}
		if tc.topology == "wordcount" && !slices.Equal(got, []string{"app-words-repartition"}) {
			t.Errorf("wordcount: %q, want [app-words-repartition]", got)
		}
	}
}

// NoCaching in a child's spec reaches the DSL word count: with caching, a commit every
// 100 lines forwards one count per word and commit; without it, one per input word.
func TestDSLWordCountCachingFollowsTheSpec(t *testing.T) {
	outputs := func(noCaching bool) (words, out int) {
		topo, err := buildTopology(&childSpec{Topology: "wordcount-dsl", Input: "lines", Output: "counts", NoCaching: noCaching}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := topologytest.New(topo, topologytest.Config{CommitEvery: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		in := topologytest.NewInputTopic(d, "lines", serde.String(), serde.String())
		counts := topologytest.NewOutputTopic(d, "counts", serde.String(), serde.Nullable(serde.Int64()))
		for i := range 300 {
			line := []string{"a b c", "a a b", "c b a d"}[i%3]
			words += len(strings.Fields(line))
			if err := in.PipeValues(line); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		recs, err := counts.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		return words, len(recs)
	}
	if words, out := outputs(true); out != words {
		t.Errorf("caching off: %d output records for %d words, want one per word", out, words)
	}
	if words, out := outputs(false); out > 4*4 {
		t.Errorf("caching on: %d output records for %d words, want at most 4 words × 4 commits", out, words)
	}
}

// openFDs counts sockets among the descriptors: a listener and both ends of a
// connection are three more.
func TestOpenFDsCountsSockets(t *testing.T) {
	before, fdsBefore := openFDs()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after, fdsAfter := openFDs()
	if after-before != 3 {
		t.Errorf("sockets %d → %d, want 3 more", before, after)
	}
	if fdsAfter-fdsBefore != 3 || fdsAfter < after {
		t.Errorf("descriptors %d → %d (sockets %d), want 3 more and at least the sockets", fdsBefore, fdsAfter, after)
	}
}

// The cost table's "per added task" is each engine's growth over its own smallest row.
func TestCostCellsPerAddedTask(t *testing.T) {
	sums := []*summary{
		{Row: "cost-tasks-128", Tasks: 128, Sockets: 260, Goroutines: 2700, MaxRSSMB: 240},
		{Row: "ks-cost-tasks-16", Tasks: 16, Sockets: 10, Goroutines: 16, MaxRSSMB: 260},
		{Row: "cost-tasks-16", Tasks: 16, Sockets: 36, Goroutines: 348, MaxRSSMB: 128},
		{Row: "ks-cost-tasks-128", Tasks: 128, Sockets: 10, Goroutines: 16, MaxRSSMB: 372},
		{Row: "wc-eos-100ms"},
	}
	cells := costCells(costSummaries(sums))
	var rows []string
	for _, c := range cells {
		rows = append(rows, c[0]+" "+c[3]+" "+c[6]+" "+c[9])
	}
	want := []string{
		"cost-tasks-16 — — —",
		"cost-tasks-128 2.00 21.00 1.00",
		"ks-cost-tasks-16 — — —",
		"ks-cost-tasks-128 0.00 0.00 1.00",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows (row, sockets, goroutines, MB per added task):\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
