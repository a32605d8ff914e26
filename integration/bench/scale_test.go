//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"

	"github.com/eddy-streams/eddy/kafkatest"
)

// The parent reads a scale child's status lines as they arrive, split anywhere by the
// pipe, among other lines; the last one counts, and the result line stays readable.
func TestStatusReaderTakesTheLastStatusLine(t *testing.T) {
	var r statusReader
	if _, ok, _ := r.status(); ok {
		t.Fatal("a status before any line")
	}
	out := statusPrefix + `{"At":1,"State":"rebalancing","Active":0,"Running":0,"Goroutines":40,"Sockets":3}` + "\n" +
		"some other line\n" +
		statusPrefix + `{"At":2,"State":"running","Active":200,"Running":200,"Goroutines":1852,"Sockets":10}` + "\n" +
		resultPrefix + `{"Sockets":10}` + "\n" +
		statusPrefix + `{"At":3,"State":"RUNNING","Active":100,"Running":100,"Goroutines":16,"Sockets":12}` // not ended yet
	for chunk := range slices.Chunk([]byte(out), 7) {
		if _, err := r.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	s, ok, err := r.status()
	want := scaleStatus{At: 2, State: "running", Active: 200, Running: 200, Goroutines: 1852, Sockets: 10}
	if !ok || err != nil || s != want {
		t.Fatalf("status %+v (ok %v, err %v), want %+v", s, ok, err, want)
	}
	if _, _ = r.Write([]byte("\n")); true {
		if s, _, _ = r.status(); s.State != "RUNNING" || !s.running() || s.Active != 100 {
			t.Errorf("after the line ended: %+v, want Kafka Streams' RUNNING with 100 tasks", s)
		}
	}
	if !strings.Contains(string(r.Bytes()), resultPrefix+`{"Sockets":10}`) {
		t.Error("the result line is lost")
	}
	if _, _ = r.Write([]byte(statusPrefix + "{not json\n")); true {
		if _, _, err := r.status(); err == nil {
			t.Error("a bad status line is not reported")
		}
	}
	for _, s := range []scaleStatus{{State: "rebalancing", Active: 4, Running: 0}, {State: "running", Active: 0}, {State: "running", Active: 4, Running: 3}} {
		if s.running() {
			t.Errorf("%+v counts as running", s)
		}
	}
}

// The scale table's constants are each engine's growth over its own smallest row, of the
// medians of the measured runs (warm-ups left out).
func TestScaleCellsPerAddedTask(t *testing.T) {
	run := func(row string, warm bool, tasks int, running float64, gor, sockets int, rss float64) *runResult {
		return &runResult{Row: row, Warmup: warm, Scale: &scaleResult{Tasks: tasks, Running: running, Goroutines: gor, Sockets: sockets, RSSMB: rss, Rebalance: 3, Moved: tasks / 2}}
	}
	results := []*runResult{
		run("ks-scale-p100", false, 200, 20, 40, 10, 400),
		run("scale-p1000", false, 2000, 30, 18000, 10, 250),
		run("scale-p100", true, 200, 99, 99999, 99, 999), // a warm-up: not counted
		run("scale-p100", false, 200, 10, 1800, 10, 50),
		run("scale-p100", false, 200, 12, 1900, 10, 52),
		run("scale-p100", false, 200, 11, 1850, 10, 51),
		run("ks-scale-p1000", false, 2000, 200, 44, 10, 2200),
		{Row: "wc-eos-100ms"}, // not a scale row
	}
	var rows []string
	for _, c := range scaleCells(scaleSummaries(results)) {
		rows = append(rows, strings.Join([]string{c[0], c[2], c[4], c[5], c[6], c[9], c[11]}, " "))
	}
	want := []string{
		// row, all running s, ms per added task, goroutines, per added task, MB per added task, moved
		"scale-p100 11.0 — 1,850 — — 100",
		"scale-p1000 30.0 10.6 18,000 8.97 0.11 1,000",
		"ks-scale-p100 20.0 — 40 — — 100",
		"ks-scale-p1000 200.0 100.0 44 0.00 1.00 1,000",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// An eddy scale child reports its state and tasks as they change: on kfake, a word count
// of 3 partitions (two sub-topologies, 6 tasks) reports 6 running tasks with its
// goroutines and sockets.
func TestScaleChildReportsRunningTasks(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const P = 3
	in := "scale-in"
	if err := b.CreateTopic(ctx, in, P, nil); err != nil {
		t.Fatal(err)
	}
	c := b.Cluster()
	for p := range int32(P) {
		if err := c.ProduceToPartition(ctx, in, p, &sarama.ProducerMessage{Value: sarama.StringEncoder(fmt.Sprintf("a b c%d", p))}); err != nil {
			t.Fatal(err)
		}
	}
	spec := &childSpec{
		Row: "scale-p3", Brokers: b.Addrs(), Input: in, Output: "scale-out", Group: "scale-app", Partitions: P,
		CommitInterval: 100 * time.Millisecond, Topology: "wordcount-dsl", ExactlyOnce: true, StateDir: t.TempDir(), Status: true,
	}
	if err := b.CreateTopic(ctx, spec.Output, P, nil); err != nil {
		t.Fatal(err)
	}
	var out statusReader
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runScale(runCtx, spec, metrics.NewRegistry(), &childResult{}, &out) }()
	var last scaleStatus
	for ctx.Err() == nil {
		s, ok, err := out.status()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			last = s
		}
		if ok && s.running() && s.Active == 2*P {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("runScale: %v", err)
	}
	if !last.running() || last.Active != 2*P || last.Goroutines < 10 || last.Sockets < 1 || last.At == 0 {
		t.Fatalf("last status %+v, want %d tasks running with goroutines, sockets and a time", last, 2*P)
	}
}
