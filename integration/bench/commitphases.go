//go:build linux

package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Commit phases (issue 25 item 3: where a worker's commit time goes). eddy's debug line
// "committed" times its steps (prepare, flush, commit, stores: eddy_commit_phase_seconds);
// sarama's debug log, read here per transactional ID, splits the transaction's commit into
// its requests: AddOffsetsToTxn, TxnOffsetCommit and EndTxn. The last phase, from EndTxn's
// answer to the next transaction's AddPartitionsToTxn success, includes the time the next
// transaction's records could not go out (the coordinator answers CONCURRENT_TRANSACTIONS
// until it has written the previous transaction's markers); it also includes the
// worker's post-commit and the time to its first record, so it bounds that wait from
// above. sarama's retry lines carry no transactional ID: their backoff is summed per
// process.
var (
	eddyPhases   = []string{"prepare", "flush", "commit", "stores"}
	saramaPhases = []string{"AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "EndTxn→AddPartitionsToTxn"}
)

// phaseClock collects the phases of a child's commits.
type phaseClock struct {
	mu     sync.Mutex
	ds     map[string][]time.Duration
	last   map[string]time.Time // per transactional ID: CommitTxn called or its last request answered
	ended  map[string]time.Time // per transactional ID: EndTxn answered, no AddPartitionsToTxn since
	addBkf time.Duration        // AddPartitionsToTxn retry backoffs, summed
}

func newPhaseClock() *phaseClock {
	return &phaseClock{ds: map[string][]time.Duration{}, last: map[string]time.Time{}, ended: map[string]time.Time{}}
}

func (c *phaseClock) add(phase string, d time.Duration) {
	c.mu.Lock()
	c.ds[phase] = append(c.ds[phase], d)
	c.mu.Unlock()
}

// retried takes one of sarama's (non-debug) log lines: an AddPartitionsToTxn retry adds its
// backoff.
func (c *phaseClock) retried(format string, v []any) {
	if !strings.HasPrefix(format, "txnmgr/add-partition-to-txn retrying") || len(v) == 0 {
		return
	}
	if ms, ok := v[0].(time.Duration); ok { // sarama prints backoff/time.Millisecond
		c.mu.Lock()
		c.addBkf += ms * time.Millisecond
		c.mu.Unlock()
	}
}

// debugLine takes one of sarama's debug lines (sarama.DebugLogger).
func (c *phaseClock) debugLine(format string, v []any) {
	if len(v) == 0 {
		return
	}
	id, ok := v[0].(string)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	step := func(phase string) {
		if t, ok := c.last[id]; ok {
			c.ds[phase] = append(c.ds[phase], now.Sub(t))
		}
		c.last[id] = now
	}
	switch {
	case strings.HasPrefix(format, "producer/txnmgr [%s] committing transaction"):
		c.last[id] = now
	case strings.HasPrefix(format, "txnmgr/add-offset-to-txn [%s] successful"):
		step("AddOffsetsToTxn")
	case strings.HasPrefix(format, "txnmgr/txn-offset-commit [%s] successful"):
		step("TxnOffsetCommit")
	case strings.HasPrefix(format, "txnmgr/endtxn [%s] successful"):
		step("EndTxn")
		delete(c.last, id)
		c.ended[id] = now
	case strings.HasPrefix(format, "txnmgr/add-partition-to-txn [%s] successful"):
		if t, ok := c.ended[id]; ok {
			c.ds["EndTxn→AddPartitionsToTxn"] = append(c.ds["EndTxn→AddPartitionsToTxn"], now.Sub(t))
			delete(c.ended, id)
		}
	}
}

func (c *phaseClock) fill(r *childResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for phase, ds := range c.ds {
		if len(ds) == 0 {
			continue
		}
		if r.PhaseMeanMs == nil {
			r.PhaseMeanMs, r.PhaseP99Ms = map[string]float64{}, map[string]float64{}
		}
		slices.Sort(ds)
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		r.PhaseMeanMs[phase] = ms(sum / time.Duration(len(ds)))
		r.PhaseP99Ms[phase] = ms(ds[min(len(ds)-1, len(ds)*99/100)])
	}
	if c.addBkf > 0 {
		r.AddPartBackoffMs = ms(c.addBkf)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// debugLogger is sarama's DebugLogger in a child: it feeds the phase clock and writes
// nothing (sarama's debug output is large).
type debugLogger struct{ c *phaseClock }

func (d debugLogger) Print(v ...any)                 {}
func (d debugLogger) Println(v ...any)               {}
func (d debugLogger) Printf(format string, v ...any) { d.c.debugLine(format, v) }

// phaseCells is the commit-phases table: per row with commit phases, each phase's mean
// and p99 in ms (medians over the runs), the AddPartitionsToTxn retries and their backoff
// per commit.
func phaseCells(sums []*summary) (header []string, rows [][]string) {
	header = []string{"row", "commits"}
	for _, p := range append(slices.Clone(eddyPhases), saramaPhases...) {
		header = append(header, p+" ms (mean / p99)")
	}
	header = append(header, "AddPartitionsToTxn retries / commit", "their backoff ms / commit")
	for _, s := range sums {
		if s.Runs == 0 || len(s.PhaseMeanMs) == 0 {
			continue
		}
		row := []string{"`" + s.Row + "`", fmt.Sprintf("%.0f", s.Commits)}
		for _, p := range append(slices.Clone(eddyPhases), saramaPhases...) {
			if _, ok := s.PhaseMeanMs[p]; !ok {
				row = append(row, "")
				continue
			}
			row = append(row, fmt.Sprintf("%.1f / %.0f", s.PhaseMeanMs[p], s.PhaseP99Ms[p]))
		}
		row = append(row, fmt.Sprintf("%.2f", s.AddPartRetriesPerCommit), fmt.Sprintf("%.1f", s.AddPartBackoffPerCommit))
		rows = append(rows, row)
	}
	return header, rows
}
