package eddy

import (
	"testing"
	"time"
)

// TestCommitGapStaysUnderTheTransactionTimeout: a worker waits as long as its last
// commit took before committing again, but never half the transaction timeout or more:
// a commit that spanned a broker restart (15 s against a 10 s timeout) otherwise made
// every later transaction outlive the timeout, and the worker was fenced in a loop (the
// exactly-once harness, seed 1796307357998205083). Kills the mutant without the cap.
func TestCommitGapStaysUnderTheTransactionTimeout(t *testing.T) {
	for _, c := range []struct {
		interval, took, timeout, want time.Duration
	}{
		{100 * time.Millisecond, 0, 10 * time.Second, 100 * time.Millisecond},
		{100 * time.Millisecond, 700 * time.Millisecond, 10 * time.Second, 700 * time.Millisecond},
		{100 * time.Millisecond, 15 * time.Second, 10 * time.Second, 5 * time.Second},
		{100 * time.Millisecond, 15 * time.Second, 0, 15 * time.Second}, // at-least-once: no transaction
	} {
		w := &worker{cfg: taskSettings{commitInterval: c.interval, txnTimeout: c.timeout}, commitTook: c.took}
		if got := w.commitGap(); got != c.want {
			t.Errorf("commitGap (interval %v, last commit took %v, transaction timeout %v) = %v, want %v", c.interval, c.took, c.timeout, got, c.want)
		}
	}
}
