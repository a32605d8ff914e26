package stream

import (
	"bytes"
	"cmp"
	"iter"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/timestate"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// EmitStrategy says when a windowed aggregation forwards its results (Kafka Streams'
// EmitStrategy).
type EmitStrategy int

const (
	// OnWindowUpdate forwards every update of a window: the default.
	OnWindowUpdate EmitStrategy = iota
	// OnWindowClose forwards each window once, when it has closed (its end plus the
	// grace period is at most the aggregation's observed stream time), with its final
	// aggregate and the timestamp of its last update (a session's: its end).
	OnWindowClose
)

// Emit sets when the aggregation forwards its windows (Kafka Streams'
// TimeWindowedKStream.emitStrategy): OnWindowClose forwards each window once it has
// closed, in the order of window start, then serialized key.
//
// As Kafka Streams, the aggregation remembers the close time up to which it has
// emitted (Kafka Streams keeps it in the commit's processor metadata; eddy in a small
// changelogged key-value store, <store>-emit-time, written in the same transaction), so
// a restart neither repeats nor loses a window. Kafka Streams throttles the check to
// once per second of wall-clock time (an internal setting); eddy checks at every
// record, which emits the same windows in the same order, sooner.
func (w *TimeWindowedStream[K, V]) Emit(s EmitStrategy) *TimeWindowedStream[K, V] {
	if s != OnWindowUpdate && s != OnWindowClose {
		w.g.s.b.fail("Emit: unknown EmitStrategy %d: use OnWindowUpdate or OnWindowClose", s)
	}
	c := *w
	c.emit = s
	return &c
}

// Emit sets when the aggregation forwards its sessions (Kafka Streams'
// SessionWindowedKStream.emitStrategy): OnWindowClose forwards each session once its
// end plus gap plus grace is at most the aggregation's observed stream time, in the
// order of session end, then serialized key, then start; see
// TimeWindowedStream.Emit.
func (w *SessionWindowedStream[K, V]) Emit(s EmitStrategy) *SessionWindowedStream[K, V] {
	if s != OnWindowUpdate && s != OnWindowClose {
		w.g.s.b.fail("Emit: unknown EmitStrategy %d: use OnWindowUpdate or OnWindowClose", s)
	}
	c := *w
	c.emit = s
	return &c
}

// finalRetentionSlack is what an OnWindowClose aggregation's store keeps beyond the
// least retention (size or gap plus grace) when no Retention is given. Closed windows
// are read back from the store to be emitted, after the record that closes them is
// stored, and a store with the least retention has expired them by then: always for
// sessions (a session closes when its end is gap plus grace before the stream time,
// which is when the store expires it), and for time windows when the stream time jumps
// by more than a window. Kafka Streams' in-memory stores lose them so; its default
// RocksDB stores expire whole segments of at least 60 s, which keeps them. eddy's stores
// expire exactly, as the in-memory ones, so they keep one minute more.
const finalRetentionSlack = time.Minute

// emitTimeStore is the store keeping an OnWindowClose aggregation's last emit close time.
func emitTimeStore(store string) string { return store + "-emit-time" }

// lastEmitKey is the one key of an emit-time store.
const lastEmitKey = "last-emit-window-close-time"

func addEmitTimeStore(b *Builder, store string, o options, node string) {
	configure(topology.AddKeyValueStore(b.tb, emitTimeStore(store), serde.String(), serde.Int64(), node), o)
}

// finalEmitter is what an OnWindowClose aggregation keeps: Kafka Streams'
// lastEmitWindowCloseTime (-1: none yet), in a cell the task rolls back when a
// transaction aborts and in a store that a restart restores it from.
type finalEmitter[K any] struct {
	last  *timestate.Cell
	meta  statestore.KeyValueStore[string, int64]
	keys  serde.Serde[K]
	store string
}

func newFinalEmitter[K any](ctx processor.StoreProvider, times *timestate.Registry, store string, keys serde.Serde[K]) (*finalEmitter[K], error) {
	meta, err := processor.KeyValueStore[string, int64](ctx, emitTimeStore(store))
	if err != nil {
		return nil, err
	}
	last, ok, err := meta.Get(lastEmitKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		last = -1
	}
	return &finalEmitter[K]{last: times.New(last), meta: meta, keys: keys, store: store}, nil
}

// due is shouldEmitFinal: the close time has progressed since the last emit.
func (f *finalEmitter[K]) due(closeTime int64) bool {
	last := f.last.Get()
	return last == -1 || last < closeTime
}

// done records closeTime as the last emit's.
func (f *finalEmitter[K]) done(closeTime int64) error {
	f.last.Set(closeTime)
	return f.meta.Put(lastEmitKey, closeTime)
}

// closed is a window to emit, with what orders it.
type closed[K, V any] struct {
	key   window.Windowed[K]
	value V
	kb    []byte
}

// collectClosed reads seq and orders its windows as Kafka Streams' time-ordered stores
// return them (the in-memory stores too): by first (a window's start; a session's
// end), then key bytes, then the window's start.
func collectClosed[K, V any](keys serde.Serde[K], topic string, seq iter.Seq2[window.Windowed[K], V], errf func() error, keep func(window.Window) bool, first func(window.Window) int64) ([]closed[K, V], error) {
	var out []closed[K, V]
	var err error
	for w, v := range seq {
		if !keep(w.Window) {
			continue
		}
		var kb []byte
		if kb, err = keys.Serialize(topic, w.Key); err != nil {
			break
		}
		out = append(out, closed[K, V]{key: w, value: v, kb: kb})
	}
	if err2 := errf(); err2 != nil || err != nil {
		return nil, cmp.Or(err2, err)
	}
	slices.SortStableFunc(out, func(a, b closed[K, V]) int {
		return cmp.Or(cmp.Compare(first(a.key.Window), first(b.key.Window)), bytes.Compare(a.kb, b.kb),
			cmp.Compare(a.key.Window.StartMs(), b.key.Window.StartMs()))
	})
	return out, nil
}

// emitFinal is Kafka Streams' maybeForwardFinalResult of its time and sliding window
// aggregations: once the close time has progressed, the windows that closed since the
// last emit (read back from the store), each with its aggregate and timestamp and the
// headers of the record that closed it.
func (p *windowProc[K, V, VA]) emitFinal(r processor.Record[K, V], closeTime int64) error {
	f := p.final
	if f == nil || !f.due(closeTime) {
		return nil
	}
	last := f.last.Get()
	var lower, upper int64
	if p.diff > 0 { // sliding: KStreamSlidingWindowAggregate's bounds (window ends inclusive)
		upper = closeTime - p.diff - 1
		if upper < 0 {
			return nil
		}
		if last != -1 {
			lower = max(0, last-p.diff)
		}
	} else { // KStreamWindowAggregate's bounds
		size := p.tw.SizeMs()
		upper = closeTime - size
		if upper < 0 {
			return nil
		}
		if last != -1 {
			lower = max(0, last-size) + 1
			// shouldRangeFetch: no new window has closed since the last emit.
			if sameStarts(p.tw.WindowsFor(upper), p.tw.WindowsFor(lower-1)) {
				return nil
			}
		}
	}
	seq, errf := p.store.FetchAll(window.Millis(lower), window.Millis(upper))
	wins, err := collectClosed(f.keys, f.store, seq, errf,
		func(window.Window) bool { return true }, window.Window.StartMs)
	if err != nil {
		return err
	}
	for _, w := range wins {
		if w.value == nil {
			continue
		}
		v := w.value.Value
		if err := p.ctx.Forward(processor.Record[window.Windowed[K], Change[VA]]{
			Key: w.key, Value: Change[VA]{New: &v}, Timestamp: w.value.Timestamp, Headers: r.Headers,
		}); err != nil {
			return err
		}
	}
	return f.done(closeTime)
}

func sameStarts(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// emitFinalSessions is KStreamSessionWindowAggregate's maybeForwardFinalResult: the
// sessions that end in [max(0, last emit close time), close time - 1], each with the
// session's end as timestamp.
func emitFinalSessions[K, V, VA any](ctx processor.Context[window.Windowed[K], Change[VA]], f *finalEmitter[K], ss statestore.SessionStore[K, VA], r processor.Record[K, V], closeTime int64) error {
	if f == nil || !f.due(closeTime) {
		return nil
	}
	upper := closeTime - 1
	if upper < 0 {
		return nil
	}
	lower := max(0, f.last.Get())
	if upper < lower {
		return nil
	}
	seq, errf := ss.All()
	sessions, err := collectClosed(f.keys, f.store, seq, errf,
		func(w window.Window) bool { return w.EndMs() >= lower && w.EndMs() <= upper }, window.Window.EndMs)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		v := s.value
		if err := ctx.Forward(processor.Record[window.Windowed[K], Change[VA]]{
			Key: s.key, Value: Change[VA]{New: &v}, Timestamp: s.key.Window.End, Headers: r.Headers,
		}); err != nil {
			return err
		}
	}
	return f.done(closeTime)
}
