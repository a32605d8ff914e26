//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rcrowley/go-metrics"

	"github.com/eddy-streams/eddy"
)

// Scale (issue 25, item 4): one instance with many tasks, then a second instance that
// takes half of them. The rows scale-p<N> run the DSL word count (two sub-topologies:
// split and repartition by word, then count) on input of N partitions, so 2N tasks, with
// a few records per partition; ks-scale-p<N> run Kafka Streams' on the same input. The
// children print a status line (statusPrefix + JSON) whenever their tasks or state
// change, and at least every second, which the parent reads as they come.

// statusPrefix starts a status line of a scale child on its stdout.
const statusPrefix = "BENCH-STATUS "

// scaleStatus is one status line: what an instance runs and holds at At.
type scaleStatus struct {
	At         int64  // unix nanoseconds
	State      string // eddy: App.State; Kafka Streams: KafkaStreams.State
	Active     int    // active tasks assigned here
	Running    int    // of them processing: all of them once State is running, else 0
	Goroutines int    // Kafka Streams: JVM threads
	Sockets    int    // open sockets (/proc/self/fd)
}

// running tells whether the instance processes with all its tasks.
func (s scaleStatus) running() bool {
	return strings.EqualFold(s.State, "running") && s.Active > 0 && s.Running == s.Active
}

// statusReader collects a child's stdout and parses its status lines as they come; the
// bytes stay available for the result line.
type statusReader struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte // a line not ended yet
	last    scaleStatus
	seen    int // status lines parsed
	bad     error
}

func (r *statusReader) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		r.parse(r.partial[:i])
		r.partial = r.partial[i+1:]
	}
	r.partial = bytes.Clone(r.partial) // let the consumed prefix go
	return len(p), nil
}

func (r *statusReader) parse(line []byte) {
	js, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(statusPrefix))
	if !ok {
		return
	}
	var s scaleStatus
	if err := json.Unmarshal(js, &s); err != nil {
		r.bad = fmt.Errorf("bad status line %q: %w", line, err)
		return
	}
	r.last, r.seen = s, r.seen+1
}

// status returns the last status line (ok false: none yet) and a parse error, if any.
func (r *statusReader) status() (s scaleStatus, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.seen > 0, r.bad
}

// Bytes returns a copy of everything the child wrote.
func (r *statusReader) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// runScale runs an eddy application as runEddy does and prints its status to w (the
// child's stdout) every 100 ms when it changed, and every second.
func runScale(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult, w io.Writer) error {
	topo, err := buildTopology(spec, nil)
	if err != nil {
		return err
	}
	logs := &logStats{}
	app, err := eddy.New(topo, eddyConfig(spec, reg, logs, nil))
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // owned by runScale: ends at stop
		printStatus(w, stop, func() scaleStatus {
			// App.State and App.Tasks are cheap; TasksView would read every store's
			// checkpoint, 2,000 bbolt reads a poll at the largest row.
			s := scaleStatus{State: string(app.State()), Active: len(app.Tasks()), Goroutines: runtime.NumGoroutine()}
			if s.State == string(eddy.StateRunning) {
				s.Running = s.Active
			}
			s.Sockets, _ = openFDs()
			return s
		})
	})
	err = app.Run(ctx)
	close(stop)
	wg.Wait()
	logs.fill(res)
	return err
}

// printStatus prints take's status to w every 100 ms when its state or tasks changed,
// and at least every second, until stop is closed.
func printStatus(w io.Writer, stop <-chan struct{}, take func() scaleStatus) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last scaleStatus
	var printed time.Time
	for {
		s := take()
		changed := s.State != last.State || s.Active != last.Active || s.Running != last.Running
		if changed || time.Since(printed) >= time.Second {
			s.At = time.Now().UnixNano()
			b, _ := json.Marshal(s)                        // plain fields: cannot fail
			_, _ = fmt.Fprintln(w, statusPrefix+string(b)) // a line in one write
			last, printed = s, time.Now()
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
