package statestore

import (
	"iter"
	"time"

	"github.com/eddy-streams/eddy/window"
)

// WindowStore is a typed store of values per key and time window, owned by one task
// (Kafka Streams' WindowStore): the store of a windowed aggregation, and the buffers of
// a stream-stream join. A window is identified by its start; the store knows the
// windows' size, which gives the windows' ends in what it returns.
//
// Retention: the store keeps windows whose start is within Retention of the latest
// window start it has been given (its observed stream time); older windows are expired
// and neither stored nor returned, as in Kafka Streams' window stores.
//
// Its changelog key is Kafka Streams' (key | window start | sequence number 0, see
// internal/windowkey), so a Java consumer reads the store's changelog.
type WindowStore[K, V any] interface {
	// Name is the store's name in the topology.
	Name() string
	// Put sets the value of key's window that starts at start. A value that serializes
	// to nil deletes it. A window that has expired is not stored.
	Put(key K, value V, start time.Time) error
	// Fetch returns the value of key's window that starts at start.
	Fetch(key K, start time.Time) (value V, ok bool, err error)
	// FetchRange returns key's windows that start in [from, to], oldest first, and the
	// function giving the error that ended the iteration (see All).
	FetchRange(key K, from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error)
	// BackwardFetchRange is FetchRange newest first.
	BackwardFetchRange(key K, from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error)
	// FetchAll returns every key's windows that start in [from, to], in key byte order
	// and by start within a key.
	FetchAll(from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error)
	// Retention is how long windows are kept after the latest window start.
	Retention() time.Duration
}

// SessionStore is a typed store of session aggregates, owned by one task (Kafka
// Streams' SessionStore). A session is a key and a window [start, end] (both
// inclusive). Retention: sessions whose end is more than Retention before the latest
// session end the store has been given are expired, neither stored nor returned.
//
// Its changelog key is Kafka Streams' (key | end | start, see internal/windowkey).
type SessionStore[K, V any] interface {
	// Name is the store's name in the topology.
	Name() string
	// Put stores the aggregate of a session. A value that serializes to nil removes it.
	Put(session window.Windowed[K], value V) error
	// Remove removes a session.
	Remove(session window.Windowed[K]) error
	// Fetch returns the aggregate of key's session [start, end].
	Fetch(key K, start, end time.Time) (value V, ok bool, err error)
	// FindSessions returns key's sessions that end at or after earliestEnd and start at
	// or before latestStart (the sessions a record at t may merge with, for t-gap and
	// t+gap), ordered by end, then start.
	FindSessions(key K, earliestEnd, latestStart time.Time) (iter.Seq2[window.Windowed[K], V], func() error)
	// BackwardFindSessions is FindSessions in the reverse order.
	BackwardFindSessions(key K, earliestEnd, latestStart time.Time) (iter.Seq2[window.Windowed[K], V], func() error)
	// All returns every session in key byte order, by end, then start, within a key.
	All() (iter.Seq2[window.Windowed[K], V], func() error)
	// Retention is how long sessions are kept after the latest session end.
	Retention() time.Duration
}
