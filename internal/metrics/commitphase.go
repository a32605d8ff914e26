package metrics

import "time"

// CommitPhases are the steps of one worker commit, in order.
type CommitPhases struct {
	// Prepare: the record caches forward, the changelog and offsets records go into
	// the transaction, the sinks pre-commit.
	Prepare time.Duration
	// Flush: waiting until the producer has every record in flight acknowledged.
	Flush time.Duration
	// Commit: the transaction's commit (AddOffsetsToTxn, TxnOffsetCommit, EndTxn under
	// exactly-once; marking the offsets under at-least-once).
	Commit time.Duration
	// Stores: the tasks' post-commit (store buffers handed over or written).
	Stores time.Duration
}

// OverlapRecords counts records processed while a commit was under way (an overlapped
// commit), as it lands.
func (m *Metrics) OverlapRecords(n int) {
	if m != nil && n > 0 {
		m.overlapRecords.Add(float64(n))
	}
}

// CommitPhases records the steps of one worker commit (eddy_commit_phase_seconds): the
// commit's time split where a worker processes nothing, which says what to overlap.
func (m *Metrics) CommitPhases(p CommitPhases) {
	if m == nil {
		return
	}
	m.commitPhase.WithLabelValues("prepare").Observe(p.Prepare.Seconds())
	m.commitPhase.WithLabelValues("flush").Observe(p.Flush.Seconds())
	m.commitPhase.WithLabelValues("commit").Observe(p.Commit.Seconds())
	m.commitPhase.WithLabelValues("stores").Observe(p.Stores.Seconds())
}
