package window

import (
	"fmt"
	"time"
)

// JoinWindows are the windows of a stream–stream join (Kafka Streams' JoinWindows): a
// record of the left stream at time t joins the right stream's records of the same key
// in [t - before, t + after]; a right record at t joins the left records in
// [t - after, t + before]. Grace is how long after a window's end, in stream time, the
// join still accepts records for it — and how long a left or outer join waits before it
// emits a record that found no partner.
type JoinWindows struct {
	before, after, grace int64 // ms
}

// JoinTimeDifference makes symmetric join windows: records join when their timestamps
// are at most timeDifference apart (JoinWindows.ofTimeDifferenceAndGrace;
// ofTimeDifferenceWithNoGrace is grace 0). Left and outer joins built on them emit
// unmatched records only once their window has closed (Kafka Streams 3.1+'s "spurious
// result fix", which the deprecated JoinWindows.of lacked).
func JoinTimeDifference(timeDifference, grace time.Duration) JoinWindows {
	d := timeDifference.Milliseconds()
	return JoinWindows{before: d, after: d, grace: grace.Milliseconds()}
}

// Before changes how far before a left record a right record may be (JoinWindows.before).
// It may be negative as long as Before + After is not.
func (w JoinWindows) Before(d time.Duration) JoinWindows {
	w.before = d.Milliseconds()
	return w
}

// After changes how far after a left record a right record may be (JoinWindows.after).
// It may be negative as long as Before + After is not.
func (w JoinWindows) After(d time.Duration) JoinWindows {
	w.after = d.Milliseconds()
	return w
}

// BeforeMs, AfterMs and GraceMs give the windows' parameters in milliseconds.
func (w JoinWindows) BeforeMs() int64 { return w.before }
func (w JoinWindows) AfterMs() int64  { return w.after }
func (w JoinWindows) GraceMs() int64  { return w.grace }

// SizeMs is before + after (JoinWindows.size()): the window size of the join's stores,
// which keep records for SizeMs + GraceMs after the latest record of their side.
func (w JoinWindows) SizeMs() int64 { return w.before + w.after }

// Validate says what is wrong with the parameters, as Kafka Streams' constructor does.
func (w JoinWindows) Validate() error {
	switch {
	case w.before+w.after < 0:
		return fmt.Errorf("join windows: before + after must not be negative, got %d ms + %d ms", w.before, w.after)
	case w.grace < 0:
		return fmt.Errorf("join windows: the grace period must not be negative, got %d ms", w.grace)
	}
	return nil
}

// String gives the parameters as Kafka Streams' JoinWindows.toString does.
func (w JoinWindows) String() string {
	return fmt.Sprintf("JoinWindows{beforeMs=%d, afterMs=%d, graceMs=%d}", w.before, w.after, w.grace)
}
