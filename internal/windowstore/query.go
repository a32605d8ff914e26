package windowstore

import (
	"errors"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/window"
)

// Range is an interactive query of a window or session store. Times are milliseconds
// since the epoch, both bounds included.
//
// Window store: the windows of Key (all keys when Key is nil) that start in [From, To],
// by start (newest first when Backward; a query of all keys is by key, then start).
//
// Session store: the sessions of Key (all keys when Key is nil) that end at or after
// From and start at or before To (Kafka Streams' findSessions(key, earliestSessionEndTime,
// latestSessionStartTime)), by end then start (newest first when Backward).
type Range struct {
	Key      []byte
	From, To int64
	Backward bool
}

// Raw is a window (session) read by a query: the serialized key, the window's bounds
// in milliseconds and the stored value's bytes.
type Raw struct {
	Key        []byte
	Start, End int64
	Value      []byte
}

// ErrKind is wrapped by a query that does not suit the store's kind.
var ErrKind = errors.New("query does not suit the kind of store")

// QueryWindows answers q from the committed windows of the window store in be: the
// same reads as a processor's, over the backend alone (no write buffer), so expired
// windows stay hidden the same way.
func QueryWindows(be kvstore.Backend, store, topic string, size, retention time.Duration, q Range) ([]Raw, error) {
	ws := NewWindowStore(committed{be, store}, topic, serde.Bytes(), serde.Bytes(), size, retention)
	from, to := window.Millis(q.From), window.Millis(q.To)
	switch {
	case q.Key == nil:
		return collectRaw(ws.FetchAll(from, to))
	case q.Backward:
		return collectRaw(ws.BackwardFetchRange(q.Key, from, to))
	default:
		return collectRaw(ws.FetchRange(q.Key, from, to))
	}
}

// QuerySessions answers q from the committed sessions of the session store in be.
func QuerySessions(be kvstore.Backend, store, topic string, retention time.Duration, q Range) ([]Raw, error) {
	ss := NewSessionStore(committed{be, store}, topic, serde.Bytes(), serde.Bytes(), retention)
	from, to := window.Millis(q.From), window.Millis(q.To)
	switch {
	case q.Key == nil:
		all, err := collectRaw(ss.All())
		if err != nil {
			return nil, err
		}
		out := all[:0]
		for _, r := range all {
			if r.End >= q.From && r.Start <= q.To {
				out = append(out, r)
			}
		}
		return out, nil
	case q.Backward:
		return collectRaw(ss.BackwardFindSessions(q.Key, from, to))
	default:
		return collectRaw(ss.FindSessions(q.Key, from, to))
	}
}

func collectRaw(seq func(func(window.Windowed[[]byte], []byte) bool), errf func() error) ([]Raw, error) {
	var out []Raw
	for w, v := range seq {
		out = append(out, Raw{Key: w.Key, Start: w.Window.StartMs(), End: w.Window.EndMs(), Value: v})
	}
	return out, errf()
}

// committed reads a store's backend as a write buffer that holds nothing: the
// committed state, which is what interactive queries see.
type committed struct {
	be    kvstore.Backend
	store string
}

func (c committed) Name() string                     { return c.store }
func (c committed) Get(key []byte) ([]byte, error)   { return c.be.Get(c.store, key) }
func (c committed) OnCommitEnd(func(committed bool)) {}
func (c committed) OnSeal(func())                    {}
func (c committed) Backend() kvstore.Backend         { return c.be }
func (c committed) ObserveTime(int64)                {} // a read-only view: it puts nothing

func (c committed) Iterate(from, to []byte) (kvstore.BytesIterator, error) {
	return c.be.Iterate(c.store, from, to)
}

// Put is never called: queries only read.
func (c committed) Put(key, value []byte) {
	panic(&statestore.StoreError{Store: c.store, Op: "put", Err: errors.New("an interactive query wrote to the store")})
}
