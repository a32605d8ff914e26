// Package sinktxn is the runtime's side of sinks beyond Kafka (package sink): the
// transaction IDs, and a task's registry of the sink transactions open in the worker's
// unit of work, which the worker pre-commits before the Kafka commit, commits after it,
// rolls back on an abort and resolves at task start (docs/architecture.md, "Sinks beyond
// Kafka").
package sinktxn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// IDPrefix starts every sink transaction ID, so an operator (and `eddy sinks`) tells
// eddy's prepared transactions from others in the same database.
const IDPrefix = "eddy:"

// MaxIDLen is the longest ID a target must hold: PostgreSQL's prepared-transaction GIDs
// are at most 200 bytes.
const MaxIDLen = 200

// ID names one task's sink transaction of one unit of work. It is derived, never stored
// alone: the Kafka transaction's offsets record carries Nonce, so the Kafka transaction
// names every sink transaction of its tasks.
type ID struct {
	App   string // application ID
	Task  string // task, "<subtopology>_<partition>"
	Node  string // the sink node
	Nonce uint64 // the worker's Kafka transaction (the offsets record's commitKey)
}

// String is the ID as a target stores it: eddy:<app>:<task>:<node>:<nonce, 16 hex digits>.
func (id ID) String() string {
	return fmt.Sprintf("%s%s:%s:%s:%016x", IDPrefix, id.App, id.Task, id.Node, id.Nonce)
}

// TaskPrefix is what every ID of the task's node starts with: a target lists the task's
// pending transactions by it.
func (id ID) TaskPrefix() string {
	return fmt.Sprintf("%s%s:%s:%s:", IDPrefix, id.App, id.Task, id.Node)
}

// ParseID reads an ID written by String.
func ParseID(s string) (ID, error) {
	rest, ok := strings.CutPrefix(s, IDPrefix)
	if !ok {
		return ID{}, fmt.Errorf("sink transaction ID %q does not start with %q", s, IDPrefix)
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 4 {
		return ID{}, fmt.Errorf("sink transaction ID %q: want %s<app>:<task>:<node>:<nonce>", s, IDPrefix)
	}
	nonce, err := strconv.ParseUint(parts[3], 16, 64)
	if err != nil || len(parts[3]) != 16 {
		return ID{}, fmt.Errorf("sink transaction ID %q: the nonce is not 16 hex digits", s)
	}
	return ID{App: parts[0], Task: parts[1], Node: parts[2], Nonce: nonce}, nil
}

// CheckName reports whether name can be part of an ID: Kafka's topic-name characters
// (which an application ID already is limited to), so that no name contains the ':'
// that separates the parts and a prefix finds one task's transactions only.
func CheckName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q has %q: a sink transaction ID holds only letters, digits, '.', '_' and '-'", what, name, r)
		}
	}
	return nil
}

// Resolver finishes a target's transactions by ID, from any process.
type Resolver interface {
	// Pending lists the prepared, unfinished transactions whose IDs start with prefix
	// (ID.TaskPrefix).
	Pending(ctx context.Context, prefix string) ([]ID, error)
	// Commit commits a prepared transaction. Committing one that is already committed
	// returns nil; one that was rolled back (or never prepared) returns an error
	// wrapping ErrNotPrepared.
	Commit(ctx context.Context, id ID) error
	// Rollback rolls back a prepared transaction; one that is not there (never
	// prepared, already rolled back) is not an error.
	Rollback(ctx context.Context, id ID) error
}

// ErrNotPrepared: a transaction to commit is neither prepared nor committed.
var ErrNotPrepared = errors.New("the sink transaction is neither prepared nor committed")

// Open is a sink transaction of the unit of work, type-erased for the runtime.
type Open interface {
	// Prepare makes the writes durable and invisible (two-phase commit), or commits
	// them (a target without prepared transactions).
	Prepare(ctx context.Context) error
	// Discard gives up a transaction that was not prepared (its writes vanish).
	Discard(ctx context.Context) error
}

// Guarantee says what a target's Prepare does.
type Guarantee int

const (
	// TwoPhase: Prepare leaves a prepared transaction that Resolver.Commit makes
	// visible. Exactly-once only.
	TwoPhase Guarantee = iota + 1
	// Idempotent: Prepare commits at once; a replay rewrites the same rows.
	Idempotent
)

func (g Guarantee) String() string {
	switch g {
	case TwoPhase:
		return "two-phase commit"
	case Idempotent:
		return "idempotent"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// Node is what the runtime knows of a sink node before any record: its resolver, for
// the recovery at task start.
type Node struct {
	Name      string
	Resolver  Resolver
	Guarantee Guarantee
}
