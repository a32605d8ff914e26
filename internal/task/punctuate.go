package task

import (
	"fmt"
	"maps"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// punctuator is one scheduled function. Like Kafka Streams, a stream-time punctuator is
// aligned to multiples of its interval since the epoch and first fires at the first
// record; a wall-clock one first fires one interval after it was scheduled. Missed
// intervals are not made up: it fires once and moves to the next interval after now.
type punctuator struct {
	node      string
	interval  time.Duration
	typ       processor.PunctuationType
	fn        processor.Punctuator
	next      time.Time
	cancelled bool
}

func (p *punctuator) Cancel() { p.cancelled = true }

// fire calls the punctuator; a panic becomes an error naming its node.
func (p *punctuator) fire(now time.Time) (err error) {
	defer graph.Contain(p.node, &err)
	return p.fn(now)
}

// Schedule implements graph.Runtime.
func (t *Task) Schedule(node string, interval time.Duration, typ processor.PunctuationType, fn processor.Punctuator) (processor.Cancellable, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("node %q: schedule: interval %v must be positive", node, interval)
	}
	if fn == nil {
		return nil, fmt.Errorf("node %q: schedule: nil punctuator", node)
	}
	p := &punctuator{node: node, interval: interval, typ: typ, fn: fn}
	switch typ {
	case processor.StreamTime:
		p.next = time.UnixMilli(0)
	case processor.WallClockTime:
		p.next = t.wallNow().Add(interval)
	default:
		return nil, fmt.Errorf("node %q: schedule: unknown punctuation type %d", node, typ)
	}
	t.punctuators = append(t.punctuators, p)
	return p, nil
}

// wallNow is the later of the task's clock and the last wall-clock punctuation time, so
// a punctuator scheduled by a punctuator counts from the time it was fired with.
func (t *Task) wallNow() time.Time {
	now := t.cfg.Now()
	if t.wallTime.After(now) {
		return t.wallTime
	}
	return now
}

func (t *Task) punctuate(typ processor.PunctuationType, now time.Time) error {
	if typ == processor.WallClockTime {
		t.wallTime = now
	}
	if typ == processor.StreamTime && now.IsZero() {
		return nil // no record yet
	}
	// Punctuators scheduled by a punctuator wait for the next round.
	due := t.punctuators[:len(t.punctuators):len(t.punctuators)]
	for _, p := range due {
		if p.cancelled || p.typ != typ || now.Before(p.next) {
			continue
		}
		missed := now.Sub(p.next) / p.interval
		p.next = p.next.Add((missed + 1) * p.interval)
		if err := p.fire(now); err != nil {
			return t.nodeError(wrapPunctuator(p.node, err), nil)
		}
	}
	// Drop cancelled ones.
	kept := t.punctuators[:0]
	for _, p := range t.punctuators {
		if !p.cancelled {
			kept = append(kept, p)
		}
	}
	t.punctuators = kept
	return nil
}

func wrapPunctuator(node string, err error) error {
	return &punctuatorError{node: node, err: err}
}

type punctuatorError struct {
	node string
	err  error
}

func (e *punctuatorError) Error() string { return fmt.Sprintf("punctuator: %v", e.err) }
func (e *punctuatorError) Unwrap() error { return e.err }

// timeState is the part of a task's state that its transaction commits besides stores
// and offsets: stream time, the time of the last wall-clock punctuation and the
// punctuation schedule (which punctuators exist, when each is next due, which are
// cancelled).
type timeState struct {
	streamTime, wallTime time.Time
	partitionTimes       map[string]time.Time
	punctuators          []punctuatorState
}

type punctuatorState struct {
	p         *punctuator
	next      time.Time
	cancelled bool
}

// Committed records the task's time state as committed: Rollback returns to it. The
// runtime calls it when a transaction commits (Init calls it too). After a Seal it is
// the sealed state that commits (the transaction that committed is the sealed one),
// and the current state stays that of the open transaction.
func (t *Task) Committed() {
	if t.sealed {
		t.committedTime, t.sealedTime = t.sealedTime, t.committedTime
		t.sealed = false
	} else {
		t.committedTime = t.snapshotTime(t.committedTime)
	}
	t.times.Committed()
}

// Seal records the task's current time state as that of the transaction now
// committing while the task processes on (an overlapped commit): the next Committed
// commits it, a Rollback drops it.
func (t *Task) Seal() {
	t.sealedTime = t.snapshotTime(t.sealedTime)
	t.sealed = true
	t.times.Seal()
}

// snapshotTime returns the current time state, reusing the maps and slices of reuse.
func (t *Task) snapshotTime(reuse timeState) timeState {
	s := timeState{streamTime: t.streamTime, wallTime: t.wallTime, partitionTimes: reuse.partitionTimes, punctuators: reuse.punctuators[:0]}
	if s.partitionTimes == nil {
		s.partitionTimes = map[string]time.Time{}
	}
	clear(s.partitionTimes)
	maps.Copy(s.partitionTimes, t.partitionTimes)
	for _, p := range t.punctuators {
		s.punctuators = append(s.punctuators, punctuatorState{p: p, next: p.next, cancelled: p.cancelled})
	}
	return s
}

// Rollback returns stream time, the wall-clock time and the punctuation schedule to the
// last Committed, when the transaction since then is aborted: the kept input replayed
// after it then advances time and fires punctuators exactly as the first time (a
// punctuator that fired in the aborted transaction fires again, and late/grace
// decisions see the stream time of the replay, not one that already counts later
// records). Punctuators scheduled since are dropped and cancelled ones revived: the
// replay schedules and cancels them again. The record caches are dropped: they hold
// updates of the aborted transaction, which the replay makes again.
func (t *Task) Rollback() {
	t.caches.Drop()
	t.times.Rollback()
	t.sealed = false
	s := t.committedTime
	t.streamTime, t.wallTime = s.streamTime, s.wallTime
	clear(t.partitionTimes)
	maps.Copy(t.partitionTimes, s.partitionTimes)
	t.punctuators = t.punctuators[:0]
	for _, ps := range s.punctuators {
		ps.p.next, ps.p.cancelled = ps.next, ps.cancelled
		t.punctuators = append(t.punctuators, ps.p)
	}
}
