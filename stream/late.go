package stream

import (
	"log/slog"
	"time"
)

// lateWarnEvery is how often an operator may warn of the late records it drops. Kafka
// Streams warns of every one ("Skipping record for expired window"); eddy logged them
// at debug level only, so a backfill that dropped half its records did so silently
// (issue 26). One line per operator and task every 10 s, with the count since the last,
// is visible without flooding the log of a backfill that drops millions.
const lateWarnEvery = 10 * time.Second

// lateWarner rate-limits one operator instance's warnings of late records.
type lateWarner struct {
	last    time.Time
	dropped int64 // since the last warning
	now     func() time.Time
}

// drop counts a late record and warns of it unless the operator warned less than
// lateWarnEvery ago; the warning counts the records dropped since the last one.
func (w *lateWarner) drop(logger *slog.Logger, msg string, args ...any) {
	w.dropped++
	now := time.Now
	if w.now != nil {
		now = w.now
	}
	t := now()
	if !w.last.IsZero() && t.Sub(w.last) < lateWarnEvery {
		return
	}
	args = append(args, "dropped_since_last_warning", w.dropped,
		"hint", "a record later than its window's grace period is dropped; a backfill of old records needs a grace that covers them (docs/dsl.md, \"Late records, grace and backfills\")")
	w.last, w.dropped = t, 0
	logger.Warn(msg, args...)
}
