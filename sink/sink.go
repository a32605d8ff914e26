// Package sink delivers a topology's records into a store outside Kafka, joined to
// eddy's commit, so that exactly-once holds end to end (docs/architecture.md, "Sinks
// beyond Kafka").
//
// A Target opens one transaction per task and unit of work (a worker's Kafka
// transaction): the sink node writes the task's records into it; at commit eddy
// prepares it (durable and invisible) before the Kafka transaction commits, and
// commits it after. The Kafka transaction names its sink transactions (their IDs
// carry the nonce of its offsets record), so at every task start eddy resolves what a
// crash left prepared: committed if the Kafka transaction that names it committed,
// rolled back otherwise.
//
// A target's Guarantee says what its Prepare does: TwoPhase leaves a prepared
// transaction to commit later (exactly-once only); Idempotent commits at once, and a
// replay writes the same rows again (at-least-once, or exactly-once with a reader that
// may briefly see rows of an aborted attempt that the replay rewrites).
//
// Package sink/pgsink implements targets for PostgreSQL. Add a sink node with
// topology.AddSinkTo or stream.Stream.ToSink.
package sink

import (
	"context"
	"time"

	"github.com/eddy-streams/eddy/internal/sinktxn"
)

// TxnID names one task's sink transaction of one unit of work. Its String form,
// eddy:<app>:<task>:<node>:<nonce>, is what a target stores (PostgreSQL: the prepared
// transaction's GID); TaskPrefix is the prefix of a task's IDs.
type TxnID = sinktxn.ID

// ParseTxnID reads a TxnID's String form.
func ParseTxnID(s string) (TxnID, error) { return sinktxn.ParseID(s) }

// Resolver finishes a target's prepared transactions by ID, from any process: Pending
// lists those whose IDs start with a prefix, Commit commits one (committing one already
// committed returns nil; one neither prepared nor committed wraps ErrNotPrepared),
// Rollback rolls one back (one not there is not an error).
type Resolver = sinktxn.Resolver

// ErrNotPrepared: a transaction to commit is neither prepared nor committed.
var ErrNotPrepared = sinktxn.ErrNotPrepared

// Guarantee says what a target's Prepare does.
type Guarantee = sinktxn.Guarantee

const (
	// TwoPhase: Prepare leaves a prepared transaction that Resolver.Commit makes
	// visible; exactly-once only (App.Run refuses it under at-least-once).
	TwoPhase = sinktxn.TwoPhase
	// Idempotent: Prepare commits at once; a replay rewrites the same rows.
	Idempotent = sinktxn.Idempotent
)

// Record is what a sink writes: the record and where its input came from (the source
// record being processed when it reached the sink; an idempotent target guards its
// rows with Partition and Offset so a replay never moves a row backwards). Topic is
// empty, and Offset -1, for a record a punctuator forwarded.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Topic     string
	Partition int32
	Offset    int64
}

// Txn is one task's transaction of one unit of work.
type Txn[K, V any] interface {
	// Write adds a record to the transaction.
	Write(ctx context.Context, rec Record[K, V]) error
	// Prepare makes the writes durable and invisible (TwoPhase), or commits them
	// (Idempotent). After an error eddy calls Rollback on the target with the
	// transaction's ID, or Discard.
	Prepare(ctx context.Context) error
	// Discard gives up a transaction that was not prepared.
	Discard(ctx context.Context) error
}

// Target is a store a sink node writes into.
type Target[K, V any] interface {
	Resolver
	// Begin opens the transaction id for one task's unit of work.
	Begin(ctx context.Context, id TxnID) (Txn[K, V], error)
	// Guarantee says what Prepare does.
	Guarantee() Guarantee
}
