package eddy

import (
	"errors"
	"time"
)

// A task retries a failing transaction (abort or recreate the producer, replay) with
// backoff for as long as its group session lives; a broker that is down ends the session
// soon enough. Within a session it gives up, stopping the application, only when the
// failure lasted recoveryBudget and at least minRecoveries attempts: a deterministic
// failure (a record too large for the broker) must not loop forever.
const (
	minRecoveries   = 10
	recoveryBudget  = 2 * time.Minute
	maxRecoverDelay = 5 * time.Second
)

// errReconsume ends an at-least-once task's session after an output failure: its
// uncommitted input is consumed again from the committed offsets.
var errReconsume = errors.New("at-least-once: re-consuming from the committed offsets")

// replay processes again the kept input at or above the committed offsets.
func (t *taskRunner) replay() error {
	kept := t.work.takeKept()
	for i, rec := range kept {
		if rec.Offset < t.committed.of(rec.Topic) {
			continue
		}
		if err := t.process(rec); err != nil {
			// keep the rest for the next attempt
			t.work.kept = append(t.work.kept, kept[i+1:]...)
			return err
		}
	}
	return nil
}
