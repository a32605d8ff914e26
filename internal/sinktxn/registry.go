package sinktxn

import (
	"context"
	"errors"
	"fmt"
)

// Registry is one task's sinks and their transactions. The task's goroutine owns it:
// the sink nodes open transactions in it while processing, and the worker prepares,
// commits, rolls back and recovers them around its Kafka transaction.
type Registry struct {
	app, task string
	nodes     []Node
	nonce     func() uint64
	// open are the transactions of the unit of work under way, by node, in the order
	// they were opened.
	open []*entry
	// committed are prepared transactions whose Kafka transaction committed, waiting
	// for Resolver.Commit (the post-commit).
	committed []*entry
	// stranded are transactions of units of work that were rolled back, whose own
	// rollback failed (the target unreachable). Known not committed, and a prepared
	// one holds its row locks against the replay's writes of the same keys: they are
	// rolled back again before the next Kafka transaction commits (Finish) and when
	// the task closes (Abandon). Forgotten, one stayed prepared for as long as the
	// task stayed (a fresh-clone CI run: a PostgreSQL crash during a prepare left one
	// behind to the end of the run).
	stranded []*entry
}

type entry struct {
	node     *Node
	id       ID
	txn      Open
	prepared bool
}

// NewRegistry returns the registry of a task's sink nodes.
func NewRegistry(app, task string, nodes []Node) *Registry {
	return &Registry{app: app, task: task, nodes: nodes}
}

// SetNonce gives the registry the nonce of the unit of work under way (the runtime: the
// worker's Kafka transaction; the test driver: a counter of its own). It is asked when a
// transaction opens.
func (r *Registry) SetNonce(nonce func() uint64) { r.nonce = nonce }

// Nodes are the task's sink nodes.
func (r *Registry) Nodes() []Node { return r.nodes }

// Open returns node's transaction of the unit of work under way, opening it with begin
// at the node's first write.
func (r *Registry) Open(node string, begin func(ID) (Open, error)) (Open, error) {
	for _, e := range r.open {
		if e.node.Name == node {
			return e.txn, nil
		}
	}
	n := r.node(node)
	if n == nil {
		return nil, fmt.Errorf("task %s: %q is not a sink node of the task", r.task, node)
	}
	if r.nonce == nil {
		return nil, fmt.Errorf("task %s: sink %s: no unit of work to open a transaction in", r.task, node)
	}
	id := ID{App: r.app, Task: r.task, Node: node, Nonce: r.nonce()}
	txn, err := begin(id)
	if err != nil {
		return nil, fmt.Errorf("task %s: sink %s: begin transaction %s: %w", r.task, node, id, err)
	}
	r.open = append(r.open, &entry{node: n, id: id, txn: txn})
	return txn, nil
}

func (r *Registry) node(name string) *Node {
	for i := range r.nodes {
		if r.nodes[i].Name == name {
			return &r.nodes[i]
		}
	}
	return nil
}

// HasOpen reports whether the unit of work under way wrote to a sink.
func (r *Registry) HasOpen() bool { return len(r.open) > 0 }

// Unfinished counts the transactions that wait for Finish: a committed unit of work's,
// waiting for their commit, and stranded ones waiting for their rollback.
func (r *Registry) Unfinished() int { return len(r.committed) + len(r.stranded) }

// Prepare pre-commits every open transaction: durable and invisible (or, for an
// idempotent target, committed). An error names the sink and the transaction; the
// caller aborts the Kafka transaction and calls Rollback.
func (r *Registry) Prepare(ctx context.Context) error {
	for _, e := range r.open {
		if e.prepared {
			continue
		}
		if err := e.txn.Prepare(ctx); err != nil {
			return fmt.Errorf("task %s: sink %s: prepare transaction %s: %w", r.task, e.node.Name, e.id, err)
		}
		e.prepared = true
		fault(StepPrepared, e.id)
	}
	return nil
}

// Committed moves the open transactions, all prepared, to the ones waiting for their
// commit: the Kafka transaction that names them committed.
func (r *Registry) Committed() {
	if len(r.open) > 0 {
		fault(StepKafkaCommitted, r.open[0].id)
	}
	for _, e := range r.open {
		if e.node.Guarantee == TwoPhase {
			r.committed = append(r.committed, e)
		}
	}
	r.open = nil
}

// Finish commits the transactions of the committed unit of work (the post-commit), and
// rolls back the stranded ones of units of work that did not commit. One that fails
// stays for the next call; the error names it.
func (r *Registry) Finish(ctx context.Context) error {
	errs := []error{r.unstrand(ctx)}
	left := r.committed[:0]
	for _, e := range r.committed {
		fault(StepCommitPrepared, e.id)
		err := e.node.Resolver.Commit(ctx, e.id)
		switch {
		case err == nil:
		case errors.Is(err, ErrNotPrepared):
			// Retrying cannot help: the transaction is gone, rolled back by someone
			// although its Kafka transaction committed. Say so; never loop.
			errs = append(errs, fmt.Errorf("task %s: sink %s: transaction %s, whose Kafka transaction committed, was rolled back outside eddy's protocol (by hand, or another application using the same application ID): its rows are not in the target: %w", r.task, e.node.Name, e.id, err))
		default:
			errs = append(errs, fmt.Errorf("task %s: sink %s: commit prepared transaction %s (its Kafka transaction committed; retried until it commits): %w", r.task, e.node.Name, e.id, err))
			left = append(left, e)
		}
	}
	r.committed = left
	return errors.Join(errs...)
}

// Rollback gives up the unit of work under way: open transactions discarded, prepared
// ones rolled back. One whose rollback fails is stranded: Finish and Abandon try again,
// and the task's next recovery rolls back any still left (it is not the last committed
// one).
func (r *Registry) Rollback(ctx context.Context) error {
	var errs []error
	for _, e := range r.open {
		if err := e.rollback(ctx); err != nil {
			r.stranded = append(r.stranded, e)
			errs = append(errs, fmt.Errorf("task %s: sink %s: roll back transaction %s (tried again before the next commit): %w", r.task, e.node.Name, e.id, err))
		}
	}
	r.open = nil
	return errors.Join(errs...)
}

// rollback undoes a transaction of a unit of work that did not commit: a prepared one
// is rolled back by ID, any other discarded (which rolls back one whose PREPARE's
// answer was lost).
func (e *entry) rollback(ctx context.Context) error {
	switch {
	case e.prepared && e.node.Guarantee == TwoPhase:
		return e.node.Resolver.Rollback(ctx, e.id)
	case !e.prepared:
		return e.txn.Discard(ctx)
	}
	return nil // prepared into an idempotent target: committed already, by design
}

// unstrand rolls back the stranded transactions; those that fail stay.
func (r *Registry) unstrand(ctx context.Context) error {
	var errs []error
	left := r.stranded[:0]
	for _, e := range r.stranded {
		if err := e.rollback(ctx); err != nil {
			errs = append(errs, fmt.Errorf("task %s: sink %s: roll back transaction %s, whose Kafka transaction did not commit (its rollback failed before; retried until it succeeds): %w", r.task, e.node.Name, e.id, err))
			left = append(left, e)
		}
	}
	clear(r.stranded[len(left):])
	r.stranded = left
	return errors.Join(errs...)
}

// Abandon forgets the unit of work under way and any committed one waiting for its
// commit, when its Kafka transaction's outcome may be unknown (the session ended, the
// worker was fenced, the task closed): open transactions that were not prepared are
// discarded; prepared ones are left to the task's next recovery, which alone can tell
// whether their Kafka transaction committed. Stranded ones, known not committed, are
// rolled back once more; what fails is left to that recovery too.
func (r *Registry) Abandon(ctx context.Context) error {
	errs := []error{r.unstrand(ctx)}
	r.stranded = nil
	for _, e := range r.open {
		if !e.prepared {
			if err := e.txn.Discard(ctx); err != nil {
				errs = append(errs, fmt.Errorf("task %s: sink %s: discard transaction %s: %w", r.task, e.node.Name, e.id, err))
			}
		}
	}
	r.open, r.committed = nil, nil
	return errors.Join(errs...)
}

// Settled resolves the unit of work under way after its Kafka transaction's outcome
// became known: committed moves its transactions to the post-commit, otherwise they
// are rolled back.
func (r *Registry) Settled(ctx context.Context, committed bool) error {
	if committed {
		r.Committed()
		return nil
	}
	return r.Rollback(ctx)
}

// Recovered is what a recovery did.
type Recovered struct {
	Committed, RolledBack []ID
}

// Recover resolves every pending transaction of the task's sinks, after the task's
// offsets record said which Kafka transaction committed last (its nonce; 0: none): a
// transaction of that nonce is committed, any other rolled back. It forgets what the
// registry held in memory first: the target's own record of what is pending is the
// truth. Called at every task start, before the task processes.
func (r *Registry) Recover(ctx context.Context, lastNonce uint64) (Recovered, error) {
	r.open, r.committed, r.stranded = nil, nil, nil
	var out Recovered
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.Guarantee != TwoPhase {
			continue
		}
		prefix := ID{App: r.app, Task: r.task, Node: n.Name}.TaskPrefix()
		ids, err := n.Resolver.Pending(ctx, prefix)
		if err != nil {
			return out, fmt.Errorf("task %s: sink %s: list its pending transactions: %w", r.task, n.Name, err)
		}
		for _, id := range ids {
			fault(StepRecover, id)
			if lastNonce != 0 && id.Nonce == lastNonce {
				if err := n.Resolver.Commit(ctx, id); err != nil {
					return out, fmt.Errorf("task %s: sink %s: commit %s, whose Kafka transaction committed: %w", r.task, n.Name, id, err)
				}
				out.Committed = append(out.Committed, id)
				continue
			}
			if err := n.Resolver.Rollback(ctx, id); err != nil {
				return out, fmt.Errorf("task %s: sink %s: roll back %s, whose Kafka transaction did not commit: %w", r.task, n.Name, id, err)
			}
			out.RolledBack = append(out.RolledBack, id)
		}
	}
	return out, nil
}

type ctxKey struct{}

// WithRegistry returns ctx carrying r, for the task's sink nodes.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the registry of the task whose context ctx is.
func FromContext(ctx context.Context) *Registry {
	r, _ := ctx.Value(ctxKey{}).(*Registry)
	return r
}
