package stream

import (
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/timestate"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// TimeWindowedStream is a grouped stream windowed by time windows (tumbling, hopping) or
// sliding windows, ready to aggregate per key and window (Kafka Streams'
// TimeWindowedKStream).
type TimeWindowedStream[K, V any] struct {
	g       *GroupedStream[K, V]
	time    window.TimeWindows
	sliding window.SlidingWindows
	isSlide bool
	emit    EmitStrategy
}

// SessionWindowedStream is a grouped stream windowed by sessions (Kafka Streams'
// SessionWindowedKStream).
type SessionWindowedStream[K, V any] struct {
	g        *GroupedStream[K, V]
	sessions window.SessionWindows
	emit     EmitStrategy
}

// WindowedBy windows the grouped stream by tumbling or hopping windows.
func (g *GroupedStream[K, V]) WindowedBy(w window.TimeWindows) *TimeWindowedStream[K, V] {
	if err := w.Validate(); err != nil {
		g.s.b.fail("WindowedBy: %v", err)
	}
	return &TimeWindowedStream[K, V]{g: g, time: w}
}

// WindowedBySliding windows the grouped stream by sliding windows.
func (g *GroupedStream[K, V]) WindowedBySliding(w window.SlidingWindows) *TimeWindowedStream[K, V] {
	if err := w.Validate(); err != nil {
		g.s.b.fail("WindowedBySliding: %v", err)
	}
	return &TimeWindowedStream[K, V]{g: g, sliding: w, isSlide: true}
}

// WindowedBySession windows the grouped stream by sessions.
func (g *GroupedStream[K, V]) WindowedBySession(w window.SessionWindows) *SessionWindowedStream[K, V] {
	if err := w.Validate(); err != nil {
		g.s.b.fail("WindowedBySession: %v", err)
	}
	return &SessionWindowedStream[K, V]{g: g, sessions: w}
}

// Retention keeps a windowed aggregation's windows (sessions) in its store for d after
// the latest window start (session end) instead of the default, the windows' size (the
// gap) plus their grace period (Kafka Streams' Materialized.withRetention). It must be
// at least that default.
func Retention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// retention is the store retention of a windowed aggregation: o's, checked against the
// least the windows need, or that least.
func (b *Builder) retention(o options, least time.Duration, what string) time.Duration {
	if o.retention == 0 {
		return least
	}
	if o.retention < least {
		b.fail("%s: the retention (%v) must be at least the windows' size (or gap) plus their grace period, %v", what, o.retention, least)
	}
	return o.retention
}

// windowAgg is an aggregation as Kafka Streams' windowed processors run it: init gives
// the aggregate before the first value (nil: null, as Reduce's), add folds a value into
// an aggregate (old nil: null).
type windowAgg[K, V, VA any] struct {
	init func() *VA
	add  func(k K, v V, old *VA) VA
}

func countAgg[K, V any]() windowAgg[K, V, int64] {
	zero := int64(0)
	return windowAgg[K, V, int64]{
		init: func() *int64 { z := zero; return &z },
		add: func(_ K, _ V, old *int64) int64 {
			if old == nil {
				return 1
			}
			return *old + 1
		},
	}
}

func reduceAgg[K, V any](fn func(agg, v V) V) windowAgg[K, V, V] {
	return windowAgg[K, V, V]{
		init: func() *V { return nil },
		add: func(_ K, v V, old *V) V {
			if old == nil {
				return v
			}
			return fn(*old, v)
		},
	}
}

func userAgg[K, V, VA any](init func() VA, fn func(K, V, VA) VA) windowAgg[K, V, VA] {
	return windowAgg[K, V, VA]{
		init: func() *VA { return nullable(init()) },
		add: func(k K, v V, old *VA) VA {
			if old == nil {
				var null VA
				return fn(k, v, null)
			}
			return fn(k, v, *old)
		},
	}
}

// Count counts the records per key and window, null values included for time windows
// (Kafka Streams' count aggregator counts every record with a key); sliding windows skip
// null values, as Kafka Streams' do.
func (w *TimeWindowedStream[K, V]) Count(opts ...Option) Table[window.Windowed[K], int64] {
	return timeWindowed(w, "KSTREAM-AGGREGATE-", opts, serde.Int64(), countAgg[K, V]())
}

// Reduce combines the values per key and window with fn, starting from the first value.
func (w *TimeWindowedStream[K, V]) Reduce(fn func(agg, v V) V, opts ...Option) Table[window.Windowed[K], V] {
	return timeWindowed(w, "KSTREAM-REDUCE-", opts, w.g.values, reduceAgg[K](fn))
}

// WindowedAggregate folds the values per key and time (or sliding) window into an
// aggregate: init() is the aggregate of an empty window, fn(key, value, aggregate) the
// next one; values serializes the aggregate in the window store.
func WindowedAggregate[K, V, VA any](w *TimeWindowedStream[K, V], init func() VA, fn func(K, V, VA) VA, values serde.Serde[VA], opts ...Option) Table[window.Windowed[K], VA] {
	return timeWindowed(w, "KSTREAM-AGGREGATE-", opts, values, userAgg(init, fn))
}

// Count counts the records per key and session.
func (w *SessionWindowedStream[K, V]) Count(opts ...Option) Table[window.Windowed[K], int64] {
	return sessionWindowed(w, "KSTREAM-AGGREGATE-", opts, serde.Int64(), countAgg[K, V](),
		func(_ K, a *int64, b int64) int64 {
			if a == nil {
				return b
			}
			return *a + b
		})
}

// Reduce combines the values per key and session with fn; merging two sessions
// combines their aggregates with fn too.
func (w *SessionWindowedStream[K, V]) Reduce(fn func(agg, v V) V, opts ...Option) Table[window.Windowed[K], V] {
	agg := reduceAgg[K](fn)
	// Kafka Streams' mergerFromAggregator: merge(a, b) = aggregate(value b into a).
	merge := func(k K, a *V, b V) V { return agg.add(k, b, a) }
	return sessionWindowed(w, "KSTREAM-REDUCE-", opts, w.g.values, agg, merge)
}

// SessionAggregate folds the values per key and session into an aggregate: init() is
// the aggregate of a new session, fn(key, value, aggregate) the next one, and merge(key,
// a, b) the aggregate of two sessions a record joins into one.
func SessionAggregate[K, V, VA any](w *SessionWindowedStream[K, V], init func() VA, fn func(K, V, VA) VA, merge func(k K, a, b VA) VA, values serde.Serde[VA], opts ...Option) Table[window.Windowed[K], VA] {
	return sessionWindowed(w, "KSTREAM-AGGREGATE-", opts, values, userAgg(init, fn), func(k K, a *VA, b VA) VA {
		if a == nil {
			var null VA
			return merge(k, null, b)
		}
		return merge(k, *a, b)
	})
}

// windowedTable sets up what every windowed aggregation shares: the node and store
// names, the input (repartitioned if the key changed) and the table's description.
func windowedTable[K, V, VA any](g *GroupedStream[K, V], prefix string, opts []Option, keys serde.Serde[window.Windowed[K]], values serde.Serde[VA]) (name, store string, in Stream[K, V], info *tableInfo[window.Windowed[K], VA], o options) {
	o = collect(opts)
	b := g.s.b
	name = b.newName(prefix)
	store = o.store
	if store == "" {
		store = b.newName(prefix + "STATE-STORE-")
	}
	in = g.input(store)
	info = &tableInfo[window.Windowed[K], VA]{node: name, keys: keys, values: values, sources: in.sources}
	info.enableOld = func(bool) bool { info.sendOld = true; return true }
	info.windowEnd = func(k window.Windowed[K]) int64 { return k.Window.EndMs() }
	return name, store, in, info, o
}

// configure applies the store options the window stores take.
func configure(sn *topology.StoreNode, o options) {
	if o.inMemory {
		sn.InMemory()
	}
	if o.withoutChangelog {
		sn.WithoutChangelog()
	}
}

// timeWindowed is Kafka Streams' KStreamWindowAggregate (time windows) and
// KStreamSlidingWindowAggregate (sliding windows), emitting every update.
func timeWindowed[K, V, VA any](w *TimeWindowedStream[K, V], prefix string, opts []Option, values serde.Serde[VA], agg windowAgg[K, V, VA]) Table[window.Windowed[K], VA] {
	b := w.g.s.b
	size, retention := w.time.Size(), w.time.Size()+w.time.Grace()
	if w.isSlide {
		size = w.sliding.TimeDifference()
		retention = 2*w.sliding.TimeDifference() + w.sliding.Grace()
	}
	keys := window.TimeWindowedSerde(w.g.keys, size)
	name, store, in, info, o := windowedTable(w.g, prefix, opts, keys, values)
	retention = b.retention(o, retention, name)
	info.closeAfter = w.time.GraceMs()
	if w.isSlide {
		info.closeAfter = w.sliding.GraceMs()
	}
	final := w.emit == OnWindowClose
	if final && o.retention == 0 {
		retention += finalRetentionSlack
	}
	storeValues := serde.Nullable(timestampedSerde(values))
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[window.Windowed[K], Change[VA]]) (func(processor.Record[K, V]) error, error) {
		ws, err := processor.WindowStore[K, *Timestamped[VA]](ctx, store)
		if err != nil {
			return nil, err
		}
		// The operator's stream time starts at its store's (Kafka Streams starts it
		// afresh, losing it at every restart): after a restart, a record that was late
		// before stays late, instead of being taken into a window the store has
		// expired by its own time, which would start the window over (the exactly-once
		// harness's long run found such a window counted 1 instead of 5). A sliding
		// window's store holds right windows starting 1 ms after their record: one less.
		start, err := storeStreamTime(ws)
		if err != nil {
			return nil, err
		}
		if w.isSlide && start > -1 {
			start--
		}
		p := &windowProc[K, V, VA]{
			ctx: ctx, store: ws, agg: agg, sendOld: info.sendOld,
			fw:       newTableForwarder(ctx, b, b.cached(o), store, keys, values),
			observed: timestate.From(ctx.Context()).New(start),
			times:    timestate.From(ctx.Context()),
		}
		if final {
			if p.final, err = newFinalEmitter(ctx, p.times, store, w.g.keys); err != nil {
				return nil, err
			}
		}
		if w.isSlide {
			p.diff, p.grace = w.sliding.TimeDifferenceMs(), w.sliding.GraceMs()
			return p.processSliding, nil
		}
		p.tw = w.time
		return p.processTime, nil
	}), in.node)
	ps := &pendingStore{name: store, processors: []string{name}}
	ps.add = func(procs []string) {
		sn := topology.AddWindowStore(b.tb, store, w.g.keys, storeValues, size, retention, procs...)
		configure(sn, o)
		topology.QueryValuesAs(sn, valueOnlySerde(values)) // queries see the aggregates alone
		if final {
			addEmitTimeStore(b, store, o, name)
		}
	}
	b.stores = append(b.stores, ps)
	info.store = ps
	return Table[window.Windowed[K], VA]{b: b, t: info}
}

type windowProc[K, V, VA any] struct {
	ctx     processor.Context[window.Windowed[K], Change[VA]]
	store   statestore.WindowStore[K, *Timestamped[VA]]
	agg     windowAgg[K, V, VA]
	fw      *tableForwarder[window.Windowed[K], VA]
	sendOld bool
	// observed is the processor's own stream time, the largest timestamp of the records
	// that reached it (Kafka Streams' observedStreamTime): a table update on another
	// input of the task does not make records late here. It is rolled back with the
	// task when a transaction aborts.
	observed *timestate.Cell
	times    *timestate.Registry
	tw       window.TimeWindows
	final    *finalEmitter[K] // OnWindowClose: emits closed windows; nil: every update
	diff     int64            // sliding windows' time difference, ms
	grace    int64            // sliding windows' grace, ms
	lateLog  lateWarner
}

// late drops a record for a window that has closed, as Kafka Streams' "Skipping record
// for expired window", counting it (eddy_dropped_records_total{reason="late"}).
func (p *windowProc[K, V, VA]) late(r processor.Record[K, V], start, end int64, closeTime int64) {
	p.times.Late()
	p.lateLog.drop(p.ctx.Logger(), "dropping a late record: its window has closed",
		"timestamp", r.Timestamp.UnixMilli(), "window", window.At(start, end).String(),
		"close", closeTime, "observed_stream_time", p.observed.Get())
}

// advance updates the observed stream time with the record's timestamp.
func (p *windowProc[K, V, VA]) advance(ts int64) int64 {
	obs := max(p.observed.Get(), ts)
	p.observed.Set(obs)
	return obs
}

// put stores the window's new aggregate (deleting the window for a null one) and
// forwards the update.
func (p *windowProc[K, V, VA]) put(r processor.Record[K, V], start, end int64, old *VA, newAgg VA, ts int64, had bool) error {
	nv := nullable(newAgg)
	var stored *Timestamped[VA]
	if nv != nil {
		stored = &Timestamped[VA]{Value: *nv, Timestamp: window.Millis(ts)}
	}
	if err := p.store.Put(r.Key, stored, window.Millis(start)); err != nil {
		return err
	}
	if p.final != nil {
		return nil // OnWindowClose: no updates (maybeForwardUpdate)
	}
	c := Change[VA]{New: nv}
	if p.sendOld {
		c.Old = old
	}
	return p.fw.forward(processor.Record[window.Windowed[K], Change[VA]]{
		Key: window.Windowed[K]{Key: r.Key, Window: window.At(start, end)}, Value: c,
		Timestamp: window.Millis(ts), Headers: r.Headers,
	}, had)
}

// processTime is KStreamWindowAggregate.process.
func (p *windowProc[K, V, VA]) processTime(r processor.Record[K, V]) error {
	if isNull(r.Key) {
		return nil // Kafka Streams: "Skipping record due to null key"
	}
	ts := r.Timestamp.UnixMilli()
	closeTime := p.advance(ts) - p.tw.GraceMs()
	// Emit what closed before storing the record (Kafka Streams emits after): the
	// record's own windows are not closed, so the output is the same, but the put may
	// advance the store's time so far that it expires closed windows not yet emitted.
	if err := p.emitFinal(r, closeTime); err != nil {
		return err
	}
	for _, start := range p.tw.WindowsFor(ts) {
		end := start + p.tw.SizeMs()
		if end <= closeTime {
			p.late(r, start, end, closeTime)
			continue
		}
		stored, had, err := p.store.Fetch(r.Key, window.Millis(start))
		if err != nil {
			return err
		}
		had = had && stored != nil
		var old *VA
		newTs := ts
		if had {
			old = &stored.Value
			newTs = max(ts, stored.Timestamp.UnixMilli())
		} else {
			old = p.agg.init()
		}
		if err := p.put(r, start, end, old, p.agg.add(r.Key, r.Value, old), newTs, had); err != nil {
			return err
		}
	}
	return nil
}

// slidingWindow is a window found in the store while processing a record.
type slidingWindow[VA any] struct {
	start int64
	value *Timestamped[VA]
}

// processSliding is KStreamSlidingWindowAggregate.process with a store that iterates
// backwards (processReverse), as Kafka Streams' built-in stores do: the order of the
// updates follows from it.
func (p *windowProc[K, V, VA]) processSliding(r processor.Record[K, V]) error {
	if isNull(r.Key) || isNull(r.Value) {
		return nil // Kafka Streams: "Skipping record due to null key or value"
	}
	ts := r.Timestamp.UnixMilli()
	closeTime := p.advance(ts) - p.grace
	if ts+p.diff < closeTime {
		p.late(r, ts, ts+p.diff, closeTime)
		return nil
	}
	if ts < p.diff {
		return p.processEarly(r, ts, closeTime)
	}
	// Emit before storing, as processTime does; the windows the record updates or
	// creates are not closed (update drops those that are).
	if err := p.emitFinal(r, closeTime); err != nil {
		return err
	}
	starts := map[int64]bool{}
	var leftAgg, rightAgg *Timestamped[VA]
	leftCreated, rightCreated := false, false
	var prevTs *int64
	seq, errf := p.store.BackwardFetchRange(r.Key, window.Millis(max(0, ts-2*p.diff)), window.Millis(ts+1))
	var found []slidingWindow[VA]
	for w, v := range seq {
		found = append(found, slidingWindow[VA]{start: w.Window.StartMs(), value: v})
	}
	if err := errf(); err != nil {
		return err
	}
loop:
	for _, w := range found {
		start, val := w.start, w.value
		starts[start] = true
		end := start + p.diff
		maxTs := val.Timestamp.UnixMilli()
		switch {
		case start == ts+1:
			rightCreated = true
		case end > ts:
			if rightAgg == nil {
				rightAgg = val
			}
			if err := p.update(r, start, val, closeTime, true); err != nil {
				return err
			}
		case end == ts:
			leftCreated = true
			if err := p.update(r, start, val, closeTime, true); err != nil {
				return err
			}
			if maxTs < ts {
				t := maxTs
				prevTs = &t
			} else {
				return nil
			}
		default: // end < ts
			leftAgg = val
			t := maxTs
			prevTs = &t
			break loop
		}
	}
	return p.createWindows(r, ts, closeTime, starts, rightAgg, leftAgg, leftCreated, rightCreated, prevTs)
}

// processEarly handles records before the time difference has passed since the epoch:
// their left windows would start before it, so they go into [0, diff] (Kafka Streams'
// processEarly).
func (p *windowProc[K, V, VA]) processEarly(r processor.Record[K, V], ts, closeTime int64) error {
	var combined *slidingWindow[VA]
	var rightAgg *Timestamped[VA]
	rightCreated := false
	starts := map[int64]bool{}
	var prevTs *int64
	seq, errf := p.store.FetchRange(r.Key, window.Millis(0), window.Millis(ts+1))
	var found []slidingWindow[VA]
	for w, v := range seq {
		found = append(found, slidingWindow[VA]{start: w.Window.StartMs(), value: v})
	}
	if err := errf(); err != nil {
		return err
	}
	for i, w := range found {
		starts[w.start] = true
		maxTs := w.value.Timestamp.UnixMilli()
		switch {
		case w.start == 0:
			combined = &found[i]
			if maxTs < ts {
				t := maxTs
				prevTs = &t
			}
		case w.start <= ts:
			rightAgg = w.value
			if err := p.update(r, w.start, w.value, closeTime, true); err != nil {
				return err
			}
		case w.start == ts+1:
			rightCreated = true
		}
	}
	if rightAgg == nil && combined != nil && combined.value.Timestamp.UnixMilli() > ts {
		rightAgg = combined.value
	}
	if !rightCreated && rightAgg != nil && rightAgg.Timestamp.UnixMilli() > ts {
		if err := p.createRight(r, ts, rightAgg); err != nil {
			return err
		}
	}
	if prevTs != nil && !starts[*prevTs+1] {
		if err := p.update(r, *prevTs+1, p.initAt(ts), closeTime, false); err != nil {
			return err
		}
	}
	if combined == nil {
		return p.update(r, 0, p.initAt(ts), closeTime, false)
	}
	return p.update(r, 0, combined.value, closeTime, true)
}

// initAt is ValueAndTimestamp.make(initializer.apply(), ts): nil for a null initial
// aggregate.
func (p *windowProc[K, V, VA]) initAt(ts int64) *Timestamped[VA] {
	v := p.agg.init()
	if v == nil {
		return nil
	}
	return &Timestamped[VA]{Value: *v, Timestamp: window.Millis(ts)}
}

// createWindows is Kafka Streams' createWindows: the previous record's right window, the
// record's left window and its right window, where they are missing.
func (p *windowProc[K, V, VA]) createWindows(r processor.Record[K, V], ts, closeTime int64, starts map[int64]bool, rightAgg, leftAgg *Timestamped[VA], leftCreated, rightCreated bool, prevTs *int64) error {
	if prevTs != nil {
		prevRight := *prevTs + 1
		if !starts[prevRight] && prevRight+p.diff >= ts {
			if err := p.update(r, prevRight, p.initAt(ts), closeTime, false); err != nil {
				return err
			}
		}
	}
	if !leftCreated {
		var val *Timestamped[VA]
		if prevTs != nil && ts-p.diff <= *prevTs {
			val = &Timestamped[VA]{Timestamp: window.Millis(ts)}
			if leftAgg != nil {
				val.Value = leftAgg.Value
			}
		} else {
			val = p.initAt(ts)
		}
		if err := p.update(r, ts-p.diff, val, closeTime, false); err != nil {
			return err
		}
	}
	if !rightCreated && rightAgg != nil && rightAgg.Timestamp.UnixMilli() > ts {
		return p.createRight(r, ts, rightAgg)
	}
	return nil
}

// createRight is createCurrentRecordRightWindow: the record's right window starts with
// the aggregate of the window it came from, unchanged (the record is not in it).
func (p *windowProc[K, V, VA]) createRight(r processor.Record[K, V], ts int64, rightAgg *Timestamped[VA]) error {
	start := ts + 1
	if err := p.store.Put(r.Key, rightAgg, window.Millis(start)); err != nil {
		return err
	}
	if p.final != nil {
		return nil // OnWindowClose: no updates
	}
	c := Change[VA]{New: &rightAgg.Value}
	return p.fw.forward(processor.Record[window.Windowed[K], Change[VA]]{
		Key: window.Windowed[K]{Key: r.Key, Window: window.At(start, start+p.diff)}, Value: c,
		Timestamp: rightAgg.Timestamp, Headers: r.Headers,
	}, false)
}

// update is updateWindowAndForward: adds the record to the window [start, start+diff]
// whose current aggregate is val (nil: null), unless the window has closed. had says
// whether the window is in the store.
func (p *windowProc[K, V, VA]) update(r processor.Record[K, V], start int64, val *Timestamped[VA], closeTime int64, had bool) error {
	end := start + p.diff
	if end < closeTime {
		p.late(r, start, end, closeTime)
		return nil
	}
	ts := r.Timestamp.UnixMilli()
	var old *VA
	newTs := ts
	if val != nil {
		old = &val.Value
		newTs = max(ts, val.Timestamp.UnixMilli())
	}
	return p.put(r, start, end, old, p.agg.add(r.Key, r.Value, old), newTs, had)
}

// sessionWindowed is Kafka Streams' KStreamSessionWindowAggregate, emitting every
// update: a record joins the key's sessions within the gap of it into one, whose
// aggregate is the merged aggregates' with the record added; each merged session is
// forwarded as a deletion (a null value), then the new one. Session updates carry the
// session's end as timestamp.
func sessionWindowed[K, V, VA any](w *SessionWindowedStream[K, V], prefix string, opts []Option, values serde.Serde[VA], agg windowAgg[K, V, VA], merge func(k K, a *VA, b VA) VA) Table[window.Windowed[K], VA] {
	b := w.g.s.b
	gap, grace := w.sessions.GapMs(), w.sessions.GraceMs()
	keys := window.SessionWindowedSerde(w.g.keys)
	name, store, in, info, o := windowedTable(w.g, prefix, opts, keys, values)
	retention := b.retention(o, time.Duration(gap+grace)*time.Millisecond, name)
	info.closeAfter = gap + grace
	final := w.emit == OnWindowClose
	if final && o.retention == 0 {
		retention += finalRetentionSlack
	}
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[window.Windowed[K], Change[VA]]) (func(processor.Record[K, V]) error, error) {
		ss, err := processor.SessionStore[K, VA](ctx, store)
		if err != nil {
			return nil, err
		}
		sendOld := info.sendOld
		fw := newTableForwarder(ctx, b, b.cached(o), store, keys, values)
		times := timestate.From(ctx.Context())
		start, err := storeStreamTime(ss) // see timeWindowed: a session store keeps session ends
		if err != nil {
			return nil, err
		}
		observed := times.New(start)
		var lateLog lateWarner
		var fe *finalEmitter[K]
		if final {
			if fe, err = newFinalEmitter(ctx, times, store, w.g.keys); err != nil {
				return nil, err
			}
		}
		forward := func(r processor.Record[K, V], s window.Windowed[K], c Change[VA], had bool) error {
			if fe != nil {
				return nil // OnWindowClose: no updates (maybeForwardUpdate)
			}
			return fw.forward(processor.Record[window.Windowed[K], Change[VA]]{
				Key: s, Value: c, Timestamp: s.Window.End, Headers: r.Headers}, had)
		}
		return func(r processor.Record[K, V]) error {
			if isNull(r.Key) {
				return nil // Kafka Streams: "Skipping record due to null key"
			}
			ts := r.Timestamp.UnixMilli()
			obs := max(observed.Get(), ts)
			observed.Set(obs)
			closeTime := obs - grace - gap
			// Emit the sessions that closed before storing the record, as processTime
			// does: a session the record merges with ends at least ts - gap, after the
			// close time, so the output is the same as Kafka Streams' (which emits after),
			// but no closed session is expired by the put before it is emitted.
			if err := emitFinalSessions(ctx, fe, ss, r, closeTime); err != nil {
				return err
			}
			type session struct {
				w window.Windowed[K]
				v VA
			}
			var merged []session
			start, end := ts, ts
			aggregate := agg.init()
			seq, errf := ss.FindSessions(r.Key, window.Millis(ts-gap), window.Millis(ts+gap))
			for s, v := range seq {
				merged = append(merged, session{s, v})
				aggregate = nullable(merge(r.Key, aggregate, v))
				start, end = min(start, s.Window.StartMs()), max(end, s.Window.EndMs())
			}
			if err := errf(); err != nil {
				return err
			}
			if end < closeTime {
				times.Late()
				lateLog.drop(ctx.Logger(), "dropping a late record: its session has closed",
					"timestamp", ts, "session", window.At(start, end).String(), "close", closeTime, "observed_stream_time", obs)
				return nil
			}
			if start != ts || end != ts {
				for _, m := range merged {
					if err := ss.Remove(m.w); err != nil {
						return err
					}
					c := Change[VA]{}
					if sendOld {
						c.Old = &m.v
					}
					if err := forward(r, m.w, c, true); err != nil {
						return err
					}
				}
			}
			newAgg := nullable(agg.add(r.Key, r.Value, aggregate))
			key := window.Windowed[K]{Key: r.Key, Window: window.At(start, end)}
			had := slices.ContainsFunc(merged, func(m session) bool { return m.w.Window == key.Window })
			if newAgg == nil {
				if err := ss.Remove(key); err != nil {
					return err
				}
			} else if err := ss.Put(key, *newAgg); err != nil {
				return err
			}
			return forward(r, key, Change[VA]{New: newAgg}, had)
		}, nil
	}), in.node)
	ps := &pendingStore{name: store, processors: []string{name}}
	ps.add = func(procs []string) {
		configure(topology.AddSessionStore(b.tb, store, w.g.keys, values, retention, procs...), o)
		if final {
			addEmitTimeStore(b, store, o, name)
		}
	}
	b.stores = append(b.stores, ps)
	info.store = ps
	return Table[window.Windowed[K], VA]{b: b, t: info}
}

// storeStreamTime is the observed stream time of a window or session store of the
// windowstore package (the largest window start or session end in it; -1 when empty or
// for a store of another kind): a lower bound of the stream time of the operator that
// wrote it.
func storeStreamTime(s any) (int64, error) {
	if o, ok := s.(interface{ ObservedTime() (int64, error) }); ok {
		return o.ObservedTime()
	}
	return -1, nil
}
