//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Cost per task (issue 13, item 2): what one instance holds — open sockets, goroutines,
// memory — as its task count grows, every task with a store, a changelog and an output.
// The rows are the baseline of the move to one transactional producer per worker; rerun
// them with `-rows cost`.

// costSampler samples the process's open sockets and goroutines every 100 ms until
// stopped, keeping the peaks.
type costSampler struct {
	mu                          sync.Mutex
	socketsPeak, goroutinesPeak int
	done                        chan struct{}
	stopped                     sync.WaitGroup
}

func newCostSampler() *costSampler {
	s := &costSampler{done: make(chan struct{})}
	s.stopped.Go(func() { // owned by s: ends at stop
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *costSampler) sample() (sockets, fds, goroutines int) {
	sockets, fds = openFDs()
	goroutines = runtime.NumGoroutine()
	s.mu.Lock()
	s.socketsPeak, s.goroutinesPeak = max(s.socketsPeak, sockets), max(s.goroutinesPeak, goroutines)
	s.mu.Unlock()
	return sockets, fds, goroutines
}

// take fills r with the current counts and the peaks so far.
func (s *costSampler) take(r *childResult) {
	r.Sockets, r.FDs, r.Goroutines = s.sample()
	s.mu.Lock()
	r.SocketsPeak, r.GoroutinesPeak = s.socketsPeak, s.goroutinesPeak
	s.mu.Unlock()
}

func (s *costSampler) stop() {
	close(s.done)
	s.stopped.Wait()
}

// openFDs counts the process's open file descriptors and, of them, its sockets (the
// links of /proc/self/fd that read "socket:[inode]").
func openFDs() (sockets, fds int) {
	const dir = "/proc/self/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		target, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue // closed meanwhile (or the directory's own descriptor)
		}
		fds++
		if strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	return sockets, fds
}

// costRow runs the count topology (the word count's counting sub-topology: a store, its
// changelog and an output per task) on input with as many partitions as tasks, exactly-
// once at 100 ms, until the input is committed, lets it run idle for -cost-settle, and
// reads what the instance holds then.
// kind is "eddy", or "kstreams" for the same topology in Kafka Streams 4.1.1
// (exactly_once_v2, one stream thread, record caching off).
func costRow(kind string, tasks int) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		if kind == "kstreams" {
			if _, err := e.needKStreams(ctx); err != nil {
				return nil, err
			}
		}
		in, err := e.needCostInput(ctx, int32(tasks))
		if err != nil {
			return nil, err
		}
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		out := id + "-out"
		if err := e.createTopic(ctx, out, in.Partitions, nil); err != nil {
			return nil, err
		}
		spec := childSpec{
			Row: r.name, Input: in.Topic, Output: out, Group: id, Partitions: in.Partitions,
			CommitInterval: 100 * time.Millisecond, Topology: "count", ExactlyOnce: true,
			StateDir: e.stateDir(id), SampleCost: true,
		}
		spec.Tune.PerTask = strings.HasSuffix(r.name, "-pertask")
		res, err := e.throughputRunSettled(ctx, r, round, kind, spec, out, e.committedThrough(ctx, id, in, nil), in, e.o.costSettle)
		if err != nil {
			return nil, err
		}
		if res.Child.TaskStarts != tasks {
			return nil, fmt.Errorf("%s: %d tasks started, want %d (log: %s)", r.name, res.Child.TaskStarts, tasks, e.work)
		}
		res.Tasks = tasks
		return res, nil
	}
}

// needCostInput writes the input of a cost row once per task count: -cost-records
// records of a key space of -vocab keys over that many partitions.
func (e *env) needCostInput(ctx context.Context, partitions int32) (*dataset, error) {
	if ds := e.costIn[partitions]; ds != nil {
		return ds, nil
	}
	topic := fmt.Sprintf("%s-cost-in-%d", e.o.prefix, partitions)
	if err := e.createTopic(ctx, topic, partitions, nil); err != nil {
		return nil, err
	}
	ds, err := e.produce(ctx, topic, partitions, e.o.costRecords, keyed(e.rng, e.o.valueSize, partitions, e.o.vocab, true), "", 0)
	if err != nil {
		return nil, err
	}
	e.costIn[partitions] = ds
	e.logf("  wrote %d keyed records (%d keys) to %s (%d partitions)", ds.Records, e.o.vocab, topic, partitions)
	return ds, nil
}
