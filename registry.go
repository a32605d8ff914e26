package eddy

import (
	"sync"

	"github.com/eddy-streams/eddy/processor"
)

// taskRegistry owns the instance's set of tasks, the group generation it belongs to and
// the owners of every task in that generation (for interactive queries). Nothing else
// reads or changes them: both rebalance hooks go through reconcile.
type taskRegistry struct {
	mu         sync.Mutex
	tasks      map[processor.TaskID]*taskRunner
	generation int32
	hosts      map[string][]string
}

func newTaskRegistry() *taskRegistry {
	return &taskRegistry{tasks: map[processor.TaskID]*taskRunner{}}
}

// newGeneration records the generation an assignment belongs to and the task owners it
// announced, and returns the previous generation.
func (r *taskRegistry) newGeneration(generation int32, hosts map[string][]string) (previous int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	previous = r.generation
	r.generation, r.hosts = generation, hosts
	return previous
}

// reconcile makes the set the assigned tasks: it takes out and returns the tasks not
// assigned any more, and those that stale (if given) says must start afresh; it makes
// the assigned tasks it lacks with create and returns them too. The caller closes the
// ones taken out, outside the registry's lock.
func (r *taskRegistry) reconcile(assigned []processor.TaskID, stale func(*taskRunner) bool, create func(processor.TaskID) *taskRunner) (closing, fresh []*taskRunner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := make(map[processor.TaskID]bool, len(assigned))
	for _, id := range assigned {
		keep[id] = true
	}
	for id, t := range r.tasks {
		if !keep[id] || (stale != nil && stale(t)) {
			closing = append(closing, t)
			delete(r.tasks, id)
		}
	}
	for _, id := range assigned {
		if _, ok := r.tasks[id]; !ok {
			t := create(id)
			r.tasks[id] = t
			fresh = append(fresh, t)
		}
	}
	return closing, fresh
}

// add makes the assigned tasks the set lacks with create and returns them; it takes
// nothing out (under cooperative rebalancing a revoked task leaves when it is released:
// remove).
func (r *taskRegistry) add(assigned []processor.TaskID, create func(processor.TaskID) *taskRunner) (fresh []*taskRunner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range assigned {
		if _, ok := r.tasks[id]; !ok {
			t := create(id)
			r.tasks[id] = t
			fresh = append(fresh, t)
		}
	}
	return fresh
}

// remove takes a task out of the set and returns it (nil: not here), for the caller to
// close.
func (r *taskRegistry) remove(id processor.TaskID) *taskRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tasks[id]
	delete(r.tasks, id)
	return t
}

// get returns a task of the set (nil: not here).
func (r *taskRegistry) get(id processor.TaskID) *taskRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[id]
}

// lookup returns a task of the set (nil: not here) and the task owners of the
// generation.
func (r *taskRegistry) lookup(id processor.TaskID) (*taskRunner, map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[id], r.hosts
}

// assignment returns the generation of the last assignment and the task owners it
// announced (host → tasks).
func (r *taskRegistry) assignment() (int32, map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.generation, r.hosts
}

// all returns the tasks of the set, in no order.
func (r *taskRegistry) all() []*taskRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*taskRunner, 0, len(r.tasks))
	for _, t := range r.tasks {
		out = append(out, t)
	}
	return out
}

// takeAll empties the set and returns what it held, for the caller to close.
func (r *taskRegistry) takeAll() []*taskRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*taskRunner, 0, len(r.tasks))
	for _, t := range r.tasks {
		out = append(out, t)
	}
	r.tasks = map[processor.TaskID]*taskRunner{}
	return out
}

// owners returns the generation and the task owners it announced (host → tasks).
func (r *taskRegistry) owners() (int32, map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.generation, r.hosts
}
