// Package eddy runs stream-processing topologies on Apache Kafka with exactly-once
// semantics: what Kafka Streams is on the JVM, as a Go library.
//
// Describe the computation with the topology package, then run it:
//
//	topo, err := wordcount.Topology()
//	app, err := eddy.New(topo, eddy.Config{
//		ApplicationID: "wordcount",
//		Brokers:       []string{"localhost:9092"},
//	})
//	err = app.Run(ctx) // until ctx ends or a fatal error
//
// An application runs one task per sub-topology and partition of its source topics.
// Instances started with the same ApplicationID share the tasks through a Kafka consumer
// group. Each task keeps its state stores in a local bbolt file, backed by a compacted
// changelog topic, and commits output records, changelog records and consumed offsets in
// one Kafka transaction (Guarantee ExactlyOnce, the default). A task that moves to
// another instance restores its stores from the changelog, reading only the tail where
// a local checkpoint exists.
//
// Query, QueryWindows and QuerySessions read the stores of a running application (and
// App.Handler serves them over HTTP); QueryableStore.GetStale accepts an answer from a
// standby replica (Config.NumStandbyReplicas) or a restoring task, with its lag.
package eddy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/topology"
)

// App is an application: a topology and its configuration. Run it once.
type App struct {
	topo   *topology.Topology
	g      *graph.Graph
	cfg    Config
	sarama *sarama.Config
	// autoFetch: the per-partition fetch size is eddy's to size (fetchSize), once the
	// source partitions are known.
	autoFetch bool
	started   atomic.Bool
	rt        atomic.Pointer[runtime]
	final     atomic.Pointer[State]
	// commitSeam, if set, wraps every transaction's commit step; eddy's fault-injection
	// tests set it (export_test.go).
	commitSeam func(tasks func() []processor.TaskID, next commitFunc) commitFunc
	// joinSeam, if set, runs at the start of every join of the member, after the
	// commit gate shut (runtime.beforeJoin); eddy's fault-injection tests set it.
	joinSeam func()
	// unstableAfter, if set, replaces how long group sessions may end on unstable
	// offsets before the runtime reports it (runtime.unstableAfter); tests set it.
	unstableAfter time.Duration
}

// Sentinel errors.
var (
	// ErrMissingTopic: a source, sink or dead-letter topic does not exist.
	ErrMissingTopic = errors.New("eddy: topic does not exist")
	// ErrPartitionMismatch: topics that must be co-partitioned are not.
	ErrPartitionMismatch = errors.New("eddy: partition counts do not match")
	// ErrStateDirLocked: another process uses the state directory.
	ErrStateDirLocked = errors.New("eddy: state directory is locked by another process")
	// ErrAlreadyRun: Run was called twice.
	ErrAlreadyRun = errors.New("eddy: Run called twice on one App")
)

// New checks the configuration and makes an App. A bad setting is an error (wrapping
// ErrConfig) that names it.
func New(topo *topology.Topology, cfg Config) (*App, error) {
	if topo == nil {
		return nil, configErr("topology", "nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sc, autoFetch, err := c.saramaConfig()
	if err != nil {
		return nil, err
	}
	g := graph.Of(topo)
	if err := checkSinks(g, c); err != nil {
		return nil, err
	}
	return &App{topo: topo, g: g, cfg: c, sarama: sc, autoFetch: autoFetch}, nil
}

// checkSinks refuses sinks outside Kafka that the configuration cannot serve: a
// two-phase-commit target needs the Kafka transaction that names its transactions, and
// every transaction ID must fit the longest a target holds (PostgreSQL's GIDs).
func checkSinks(g *graph.Graph, c Config) error {
	for _, n := range g.Order {
		if n.Sink == nil {
			continue
		}
		if n.Sink.Guarantee == sinktxn.TwoPhase && c.Guarantee == AtLeastOnce {
			return configErr("Guarantee", "sink node %q writes with two-phase commit, which only exactly-once drives (its transactions are committed by the Kafka transaction that names them): use Guarantee ExactlyOnce, or an idempotent target", n.Name)
		}
		longest := sinktxn.ID{App: c.ApplicationID, Task: "65535_2147483647", Node: n.Name, Nonce: 1}.String()
		if len(longest) > sinktxn.MaxIDLen {
			return configErr("ApplicationID", "with sink node %q its transaction IDs take up to %d bytes, more than the %d a target must hold: shorten the application ID or the node's name", n.Name, len(longest), sinktxn.MaxIDLen)
		}
	}
	return nil
}

// Config returns the configuration with its defaults filled in.
func (a *App) Config() Config { return a.cfg }

// Run runs the application until ctx ends (then it commits the open transactions,
// closes the stores and leaves the group, and returns nil) or a fatal error stops it
// (returned: a processor's error names task, node and offset). Start-up checks come
// first: source and sink topics must exist, the sources of one sub-topology must have
// equal partition counts, and the internal topics are created.
func (a *App) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	err := a.cfg.explainRefusal(a.run(ctx))
	final := StateStopped
	if err != nil {
		final = StateFailed
	}
	a.final.Store(&final)
	return err
}

func (a *App) run(ctx context.Context) error {
	rt, err := newRuntime(a)
	if err != nil {
		return err
	}
	a.rt.Store(rt)
	defer rt.close()
	if err := rt.prepareTopics(ctx); err != nil {
		return err
	}
	return rt.run(ctx)
}

// Tasks lists the tasks this instance runs now, sorted; TasksView (GET /tasks) tells
// their states, store checkpoints and lags.
func (a *App) Tasks() []processor.TaskID {
	rt := a.rt.Load()
	if rt == nil {
		return nil
	}
	set := map[processor.TaskID]bool{}
	for _, t := range rt.registry.all() {
		if !t.dead.Load() {
			set[t.id] = true
		}
	}
	return sortedTasks(set)
}

func (a *App) String() string { return fmt.Sprintf("eddy app %q", a.cfg.ApplicationID) }
