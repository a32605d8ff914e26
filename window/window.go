// Package window defines time windows, as Kafka Streams' kstream package does: the
// window of a windowed key (Window, Windowed), the kinds of windows an aggregation
// groups records into (TimeWindows for tumbling and hopping windows, SlidingWindows,
// SessionWindows), and the serdes of windowed keys, byte-compatible with Kafka Streams'
// TimeWindowedSerde and SessionWindowedSerde.
//
// Times are milliseconds since the Unix epoch, as record timestamps are in Kafka: a
// Window's Start and End are UTC times of millisecond precision, and durations are
// truncated to milliseconds.
//
// # Window semantics (Kafka Streams 4.1)
//
//   - A time window [Start, End) holds the records with Start <= timestamp < End. Tumbling
//     windows (Tumbling) of size s start at multiples of s; hopping windows (Hopping)
//     of size s and advance a start at multiples of a, so a record falls into s/a of them.
//     Windows never start before the epoch.
//   - A sliding window (Sliding) of time difference d holds records at most d apart: its
//     end is inclusive, [Start, Start+d]. Windows exist only where records are: each
//     record makes the window that ends at it, and the one that starts just after it.
//   - A session (Sessions) of inactivity gap g is a run of a key's records in which no two
//     consecutive records are more than g apart; its Start and End are its first and last
//     record's timestamps (both inclusive). A record between two sessions merges them.
//   - Grace: a window accepts records until its end plus the grace period has passed in
//     stream time (the largest timestamp the aggregation has seen); later records are
//     dropped as late. Stream time is the aggregation's own, observed from the records
//     that reach it.
package window

import (
	"fmt"
	"time"
)

// Window is the time span of a windowed key: [Start, End) for time windows, [Start, End]
// for sliding windows and sessions.
type Window struct {
	Start, End time.Time
}

// StartMs and EndMs are the bounds in milliseconds since the epoch.
func (w Window) StartMs() int64 { return w.Start.UnixMilli() }
func (w Window) EndMs() int64   { return w.End.UnixMilli() }

// String gives the bounds in milliseconds, as Kafka Streams logs a window.
func (w Window) String() string { return fmt.Sprintf("[%d,%d]", w.StartMs(), w.EndMs()) }

// Windowed is a key with the window it was aggregated in: the key of a windowed
// aggregation's table (Kafka Streams' Windowed<K>).
type Windowed[K any] struct {
	Key    K
	Window Window
}

// At makes the Window of two millisecond timestamps.
func At(startMs, endMs int64) Window {
	return Window{Start: Millis(startMs), End: Millis(endMs)}
}

// Millis is the UTC time of ms milliseconds since the epoch.
func Millis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// TimeWindows are fixed-size windows: tumbling (advance = size) or hopping (advance <
// size), with a grace period (Kafka Streams' TimeWindows).
type TimeWindows struct {
	size, advance, grace int64 // ms
}

// Tumbling makes windows of the given size that do not overlap, each accepting late
// records for grace after its end (TimeWindows.ofSizeAndGrace; ofSizeWithNoGrace is
// grace 0).
func Tumbling(size, grace time.Duration) TimeWindows {
	return TimeWindows{size: size.Milliseconds(), advance: size.Milliseconds(), grace: grace.Milliseconds()}
}

// Hopping makes windows of the given size that start every advance (TimeWindows.
// ofSizeAndGrace(size, grace).advanceBy(advance)).
func Hopping(size, advance, grace time.Duration) TimeWindows {
	return TimeWindows{size: size.Milliseconds(), advance: advance.Milliseconds(), grace: grace.Milliseconds()}
}

// Size, Advance and Grace give the windows' parameters.
func (w TimeWindows) Size() time.Duration    { return time.Duration(w.size) * time.Millisecond }
func (w TimeWindows) Advance() time.Duration { return time.Duration(w.advance) * time.Millisecond }
func (w TimeWindows) Grace() time.Duration   { return time.Duration(w.grace) * time.Millisecond }

// SizeMs, AdvanceMs and GraceMs give them in milliseconds.
func (w TimeWindows) SizeMs() int64    { return w.size }
func (w TimeWindows) AdvanceMs() int64 { return w.advance }
func (w TimeWindows) GraceMs() int64   { return w.grace }

// Validate says what is wrong with the parameters, as Kafka Streams' constructors do.
func (w TimeWindows) Validate() error {
	switch {
	case w.size <= 0:
		return fmt.Errorf("time windows: the size must be at least 1 ms, got %d ms", w.size)
	case w.advance <= 0 || w.advance > w.size:
		return fmt.Errorf("time windows: the advance must be at least 1 ms and at most the size (%d ms), got %d ms", w.size, w.advance)
	case w.grace < 0:
		return fmt.Errorf("time windows: the grace period must not be negative, got %d ms", w.grace)
	}
	return nil
}

// WindowsFor returns the starts of the windows that hold a record at timestamp ts (in
// ms), in ascending order (TimeWindows.windowsFor). The windows end at start+size.
func (w TimeWindows) WindowsFor(ts int64) []int64 {
	start := (max(0, ts-w.size+w.advance) / w.advance) * w.advance
	var out []int64
	for ; start <= ts; start += w.advance {
		out = append(out, start)
	}
	return out
}

// SlidingWindows are windows of a fixed time difference that slide with the records
// (Kafka Streams' SlidingWindows): every window that holds a distinct set of records
// exists, and only those.
type SlidingWindows struct {
	diff, grace int64 // ms
}

// Sliding makes sliding windows that hold records at most timeDifference apart
// (SlidingWindows.ofTimeDifferenceAndGrace).
func Sliding(timeDifference, grace time.Duration) SlidingWindows {
	return SlidingWindows{diff: timeDifference.Milliseconds(), grace: grace.Milliseconds()}
}

// TimeDifference and Grace give the windows' parameters.
func (w SlidingWindows) TimeDifference() time.Duration {
	return time.Duration(w.diff) * time.Millisecond
}
func (w SlidingWindows) Grace() time.Duration { return time.Duration(w.grace) * time.Millisecond }

// TimeDifferenceMs and GraceMs give them in milliseconds.
func (w SlidingWindows) TimeDifferenceMs() int64 { return w.diff }
func (w SlidingWindows) GraceMs() int64          { return w.grace }

// Validate says what is wrong with the parameters.
func (w SlidingWindows) Validate() error {
	switch {
	case w.diff < 0:
		return fmt.Errorf("sliding windows: the time difference must not be negative, got %d ms", w.diff)
	case w.grace < 0:
		return fmt.Errorf("sliding windows: the grace period must not be negative, got %d ms", w.grace)
	}
	return nil
}

// SessionWindows group a key's records into sessions separated by gaps of inactivity
// (Kafka Streams' SessionWindows).
type SessionWindows struct {
	gap, grace int64 // ms
}

// Sessions makes session windows with the given inactivity gap
// (SessionWindows.ofInactivityGapAndGrace).
func Sessions(gap, grace time.Duration) SessionWindows {
	return SessionWindows{gap: gap.Milliseconds(), grace: grace.Milliseconds()}
}

// Gap and Grace give the windows' parameters.
func (w SessionWindows) Gap() time.Duration   { return time.Duration(w.gap) * time.Millisecond }
func (w SessionWindows) Grace() time.Duration { return time.Duration(w.grace) * time.Millisecond }

// GapMs and GraceMs give them in milliseconds.
func (w SessionWindows) GapMs() int64   { return w.gap }
func (w SessionWindows) GraceMs() int64 { return w.grace }

// Validate says what is wrong with the parameters.
func (w SessionWindows) Validate() error {
	switch {
	case w.gap <= 0:
		return fmt.Errorf("session windows: the inactivity gap must be at least 1 ms, got %d ms", w.gap)
	case w.grace < 0:
		return fmt.Errorf("session windows: the grace period must not be negative, got %d ms", w.grace)
	}
	return nil
}
