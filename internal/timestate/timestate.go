// Package timestate holds time kept by processors outside stores, that a task returns to
// its committed value when a transaction aborts: the observed stream time of Kafka
// Streams' windowed processors (the largest timestamp that reached the processor, which
// decides which records are late). Without the rollback, the replay of an aborted
// transaction's input would meet a stream time that already counts its later records,
// and drop records as late that the first pass accepted.
//
// One Registry per task, in the task's context.Context (processor.Context.Context());
// the task calls Committed when a transaction commits and Rollback when one aborts. A
// transaction still committing while the task processes on (an overlapped commit) is
// sealed first: Seal keeps each cell's value at that point, which the next Committed
// commits (the values since stay current), and Rollback returns past it.
package timestate

import "context"

// Registry holds a task's cells, and counts the records its windowed processors dropped
// as late. Not safe for concurrent use: the task's goroutine owns it.
type Registry struct {
	cells  []*Cell
	late   int64
	sealed bool
}

// Late counts a record dropped as late (after its windows' grace period). The count only
// grows, as a Prometheus counter must: a record dropped in an aborted transaction and
// again in its replay counts twice, as Kafka Streams' dropped-records sensor counts it.
func (r *Registry) Late() {
	if r != nil {
		r.late++
	}
}

// LateCount is the number of records dropped as late so far: the source of
// eddy_dropped_records_total{reason="late"}.
func (r *Registry) LateCount() int64 {
	if r == nil {
		return 0
	}
	return r.late
}

// Cell is one int64 of time state (milliseconds), rolled back with its task.
type Cell struct{ v, committed, sealed int64 }

// Get returns the current value.
func (c *Cell) Get() int64 { return c.v }

// Set changes the current value.
func (c *Cell) Set(v int64) { c.v = v }

// New adds a cell whose committed and current value is initial. With a nil registry
// (a processor run outside a task) the cell is not rolled back.
func (r *Registry) New(initial int64) *Cell {
	c := &Cell{v: initial, committed: initial}
	if r != nil {
		r.cells = append(r.cells, c)
	}
	return c
}

// Seal keeps every cell's current value as that of the transaction now committing.
func (r *Registry) Seal() {
	for _, c := range r.cells {
		c.sealed = c.v
	}
	r.sealed = true
}

// Committed makes every cell's sealed value its committed one after a Seal, else its
// current value.
func (r *Registry) Committed() {
	for _, c := range r.cells {
		if r.sealed {
			c.committed = c.sealed
		} else {
			c.committed = c.v
		}
	}
	r.sealed = false
}

// Rollback returns every cell to its committed value (a sealed transaction's values
// are dropped with it).
func (r *Registry) Rollback() {
	for _, c := range r.cells {
		c.v = c.committed
	}
	r.sealed = false
}

type key struct{}

// WithRegistry returns ctx carrying r.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, key{}, r)
}

// From returns the registry in ctx, or nil.
func From(ctx context.Context) *Registry {
	r, _ := ctx.Value(key{}).(*Registry)
	return r
}
