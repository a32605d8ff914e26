package eddy

import (
	"errors"
	"time"

	"github.com/IBM/sarama"
)

// A read_committed member asks for its committed offsets with RequireStable (KIP-447):
// while a transaction that committed offsets for a partition is open, the group
// coordinator answers UNSTABLE_OFFSET_COMMIT, sarama retries a few times and ends the
// session, and the runtime joins again. That passes once the transaction ends, at the
// latest when the transaction coordinator aborts it for its timeout. Past that, no open
// transaction explains it: Kafka 4.1.1 answered so for two input partitions for more
// than ten minutes after a broker kill -9, with every transactional ID of the group's
// producers Empty and no open transaction in the group's __consumer_offsets partition,
// until the broker was restarted (two long runs of the exactly-once harness,
// 2026-12-04). The cause is a race in Kafka's group coordinator when it reloads that
// partition (docs/kafka-notes.md, "The group coordinator after a restart";
// integration/eos/cmd/unstable-wedge reproduces it without eddy). The application
// processes nothing meanwhile, and only the rejoins said so, as warnings; now an error
// says what is wrong and what to do.

// unstableSlack is how long past Config.TransactionTimeout an open transaction can keep
// offsets unstable: the transaction coordinator looks for timed-out transactions every
// 10 s by default (transaction.abort.timed.out.transaction.cleanup.interval.ms), then
// writes the abort markers.
const unstableSlack = 30 * time.Second

// unstableReportEvery spaces the errors while the condition lasts.
const unstableReportEvery = time.Minute

// unstableOffsets follows the group sessions that end on UNSTABLE_OFFSET_COMMIT, one
// after the other; the runtime's consume loop owns it.
type unstableOffsets struct {
	since    time.Time // when the run of such ends began; zero: not in one
	reported time.Time
}

// observe takes how a session ended (nil: it ran) at now, and reports how long the
// sessions have ended on unstable offsets when that is past after and no report was
// made in the last unstableReportEvery.
func (u *unstableOffsets) observe(err error, now time.Time, after time.Duration) (lasted time.Duration, report bool) {
	if err == nil || !errors.Is(err, sarama.ErrUnstableOffsetCommit) {
		u.since, u.reported = time.Time{}, time.Time{}
		return 0, false
	}
	if u.since.IsZero() {
		u.since = now
	}
	lasted = now.Sub(u.since)
	if lasted < after || (!u.reported.IsZero() && now.Sub(u.reported) < unstableReportEvery) {
		return lasted, false
	}
	u.reported = now
	return lasted, true
}

// unstableAfter is how long sessions may end on unstable offsets before the runtime
// reports it as an error.
func (rt *runtime) unstableAfter() time.Duration {
	if rt.app.unstableAfter > 0 {
		return rt.app.unstableAfter
	}
	return rt.cfg.TransactionTimeout + unstableSlack
}
