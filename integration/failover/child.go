//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

const storeName = "kv"

// spec is what a child runs.
type spec struct {
	Brokers  []string
	App      string
	Input    string
	StateDir string
	Standbys int
	// InstanceID is Config.InstanceID (static membership; empty: dynamic).
	InstanceID string
	// SessionTimeout is the group's session timeout (sarama's
	// Consumer.Group.Session.Timeout; 0: eddy's 10 s).
	SessionTimeout time.Duration
	// Impl is the application the child runs (kstreams.go): eddy or Kafka Streams.
	Impl impl
	tuning
}

// tuning is what -heartbeat, -probing, -warmups and -cooperative set, for eddy's
// children only (0: eddy's defaults): the group heartbeat interval (sarama's
// Consumer.Group.Heartbeat.Interval, 250 ms), Config.ProbingRebalanceInterval (10 min),
// Config.MaxWarmupReplicas (2; -1: no warm-ups) and Config.RebalanceProtocol
// (Cooperative: eddy.CooperativeRebalancing; eager, the default, otherwise).
type tuning struct {
	Heartbeat, Probing time.Duration
	MaxWarmups         int
	Cooperative        bool
}

// protocol is the Config.RebalanceProtocol the tuning asks for.
func (t tuning) protocol() eddy.RebalanceProtocol {
	if t.Cooperative {
		return eddy.CooperativeRebalancing
	}
	return eddy.EagerRebalancing
}

// event is one line a child prints on stdout.
type event struct {
	Kind     string   `json:"kind"` // status, restored, first, tick
	Task     string   `json:"task,omitempty"`
	Records  int64    `json:"records,omitempty"`
	Millis   int64    `json:"ms,omitempty"`
	At       int64    `json:"at,omitempty"` // unix nanoseconds
	Active   []string `json:"active,omitempty"`
	Standby  int      `json:"standby,omitempty"`
	StandbyN int      `json:"standby_running,omitempty"`
	Lag      int64    `json:"standby_lag,omitempty"`
	Gen      int32    `json:"generation,omitempty"`
	// Warm-up replicas (eddy's children) and the changelog records they applied.
	Warmup    int   `json:"warmup,omitempty"`
	WarmupRec int64 `json:"warmup_records,omitempty"`
}

// proc is a child process and what it reported.
type proc struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	last     event
	first    map[string]time.Time
	restored map[string]event
	// ticks are, per task, the times it processed records here (at most one
	// every tickEvery), and restores every restore report with its time.
	ticks    map[string][]time.Time
	restores []timedRestore
	done     chan struct{}
	// races counts the race detector's reports on its stderr (a child of a test
	// binary built with -race), pauses reads eddy's reports of its kept tasks' pause
	// there (keptpause.go).
	races  *raceCounter
	pauses *pauseReader
	// peakWarmup is the most warm-up replicas it reported at once, and
	// peakWarmupRec the most records they had applied.
	peakWarmup    int
	peakWarmupRec int64
}

// raceCounter counts the lines "WARNING: DATA RACE" written to it.
type raceCounter struct {
	mu      sync.Mutex
	n       int
	partial []byte
}

func (r *raceCounter) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = splitLines(r.partial, b, func(line []byte) {
		if bytes.Contains(line, []byte("WARNING: DATA RACE")) {
			r.n++
		}
	})
	return len(b), nil
}

func (r *raceCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

type timedRestore struct {
	at time.Time
	e  event
}

func startChild(s spec) (*proc, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := childCommand(self, s, b)
	// A child outlives no parent: when this process ends, however (a failed test, a
	// go test timeout, a SIGKILL), the kernel kills its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	races, pauses := &raceCounter{}, &pauseReader{}
	cmd.Stderr = io.MultiWriter(os.Stderr, races, pauses)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, races: races, pauses: pauses, first: map[string]time.Time{}, restored: map[string]event{}, ticks: map[string][]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			p.mu.Lock()
			switch e.Kind {
			case "status":
				p.last = e
				p.peakWarmup = max(p.peakWarmup, e.Warmup)
				p.peakWarmupRec = max(p.peakWarmupRec, e.WarmupRec)
			case "first":
				p.first[e.Task] = time.Unix(0, e.At)
				p.ticks[e.Task] = append(p.ticks[e.Task], time.Unix(0, e.At))
			case "tick":
				p.ticks[e.Task] = append(p.ticks[e.Task], time.Unix(0, e.At))
			case "restored":
				p.restores = append(p.restores, timedRestore{at: time.Now(), e: e})
				r := p.restored[e.Task]
				r.Records += e.Records
				r.Millis += e.Millis
				p.restored[e.Task] = r
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

func (p *proc) status() event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *proc) firsts() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range p.first {
		out[k] = v
	}
	return out
}

func (p *proc) restoredOf(task string) event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restored[task]
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	_ = p.cmd.Wait()
}

func (p *proc) term() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		_ = p.cmd.Wait()
	case <-time.After(time.Minute):
		p.kill()
	}
}

// child runs one instance and reports on stdout.
func child(arg string) error {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		return err
	}
	var outMu sync.Mutex
	emit := func(e event) {
		b, _ := json.Marshal(e)
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.Write(append(b, '\n'))
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.Bytes(), s.Input)
	topology.AddProcessor(b, "put", func() processor.Processor[string, []byte, string, []byte] {
		return &putter{first: func(task string) {
			emit(event{Kind: "first", Task: task, At: time.Now().UnixNano()})
		}, tick: func(task string, at time.Time) {
			emit(event{Kind: "tick", Task: task, At: at.UnixNano()})
		}}
	}, "in")
	topology.AddKeyValueStore(b, storeName, serde.String(), serde.Bytes(), "put")
	topo, err := b.Build()
	if err != nil {
		return err
	}
	app, err := eddy.New(topo, eddy.Config{
		ApplicationID: s.App, Brokers: s.Brokers, StateDir: s.StateDir, NumStandbyReplicas: s.Standbys, InstanceID: s.InstanceID,
		ProbingRebalanceInterval: s.Probing, MaxWarmupReplicas: s.MaxWarmups, RebalanceProtocol: s.protocol(),
		Sarama: func(c *sarama.Config) {
			if s.SessionTimeout > 0 {
				c.Consumer.Group.Session.Timeout = s.SessionTimeout
			}
			if s.Heartbeat > 0 {
				c.Consumer.Group.Heartbeat.Interval = s.Heartbeat
			}
		},
		Logger: slog.New(keptPauseLogs{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})}),
		OnRestore: func(task processor.TaskID, r changelog.Result) {
			if r.Store == storeName {
				emit(event{Kind: "restored", Task: task.String(), Records: r.Records, Millis: r.Duration.Milliseconds()})
			}
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			v := app.TasksView()
			e := event{Kind: "status", Gen: v.Generation}
			for _, t := range v.Tasks {
				switch t.Role {
				case "active":
					if t.State == "running" {
						e.Active = append(e.Active, t.Task)
					}
				case "warm-up":
					e.Warmup++
					e.WarmupRec += t.StandbyRecords
				case "standby":
					e.Standby++
					if t.State == "running" {
						e.StandbyN++
					}
					for _, st := range t.Stores {
						if st.Lag != nil {
							e.Lag += *st.Lag
						}
					}
				}
			}
			sort.Strings(e.Active)
			emit(e)
		}
	}()
	return app.Run(ctx)
}

// tickEvery is how often a task reports that it processes records: the resolution
// of the pauses -scenario rolling measures (a pause is measured up to tickEvery
// long), at 20 lines a second per task.
const tickEvery = 50 * time.Millisecond

// putter puts every record in the store and reports the first record of each task's
// life on this instance (a task opened here anew makes new processors), then a tick
// at the first record processed tickEvery after the last report.
type putter struct {
	ctx      processor.Context[string, []byte]
	kv       statestore.KeyValueStore[string, []byte]
	first    func(task string)
	tick     func(task string, at time.Time)
	task     string
	seen     bool
	lastTick time.Time
}

func (p *putter) Init(ctx processor.Context[string, []byte]) error {
	p.ctx, p.task = ctx, ctx.TaskID().String()
	var err error
	p.kv, err = processor.KeyValueStore[string, []byte](ctx, storeName)
	return err
}

func (p *putter) Process(rec processor.Record[string, []byte]) error {
	if !p.seen {
		p.seen = true
		p.lastTick = time.Now()
		p.first(p.task)
	} else if now := time.Now(); now.Sub(p.lastTick) >= tickEvery {
		p.lastTick = now
		p.tick(p.task, now)
	}
	return p.kv.Put(rec.Key, rec.Value)
}

func (p *putter) Close() error { return nil }
