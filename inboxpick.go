package eddy

import "time"

// pick returns the queue whose head has the smallest timestamp (ties: by topic name),
// or nil when none may be processed now: all empty, or some queue empty and still
// waited for while others have records (Kafka Streams' PartitionGroup.readyToProcess,
// KIP-695). An empty queue is waited for
//   - while its claim is behind its high-water mark (or has not started), up to
//     behindWait: there are records on the broker the claim has not delivered yet, or
//     only transaction markers (see behindWait);
//   - and, with a positive idle time (Config.MaxTaskIdle, max.task.idle.ms), up to
//     that long, even with nothing known on the broker;
//   - never with a negative idle time.
//
// A queue's wait starts when it is first seen empty and ends when a record arrives;
// once it ran out the others are processed past it ("enforced processing", reported
// once), so a partition that stays silent delays the task once, not at every record.
func (in *inbox) pick(now time.Time) *queue {
	var best *queue
	waiting := false
	var gaveUp []*queue
	for _, q := range in.list {
		if q.head >= len(q.msgs) {
			if in.idle < 0 || len(in.list) < 2 {
				continue
			}
			if q.emptySince.IsZero() {
				q.emptySince = now
			}
			limit := in.idle
			if q.behind() {
				limit = max(limit, in.behindWait)
				in.maybeProbe(q)
			}
			if now.Sub(q.emptySince) < limit {
				waiting = true
			} else if limit > 0 && !q.enforcedDone {
				gaveUp = append(gaveUp, q)
			}
			continue
		}
		q.emptySince, q.enforcedDone = time.Time{}, false
		if best == nil {
			best = q
			continue
		}
		m, b := q.msgs[q.head], best.msgs[best.head]
		if m.Timestamp.Before(b.Timestamp) || (m.Timestamp.Equal(b.Timestamp) && q.topic < best.topic) {
			best = q
		}
	}
	if waiting || best == nil {
		return nil
	}
	for _, q := range gaveUp {
		q.enforcedDone = true
		if in.enforced != nil {
			in.enforced(q.topic, now.Sub(q.emptySince), q.behind())
		}
	}
	return best
}

// behind reports whether the claim has records (or markers) to deliver that it knows
// are on the broker, or has not started.
func (q *queue) behind() bool {
	return !q.started || (q.hwm != nil && q.hwm() > max(q.fetched, q.clear))
}

// maybeProbe starts a probe of the gap between q's position and its high-water mark,
// unless one runs or ran for the same position and mark. Called with in.mu held.
func (in *inbox) maybeProbe(q *queue) {
	if in.probe == nil || q.probing || !q.started || q.hwm == nil {
		return
	}
	pos, hwm := max(q.fetched, q.clear), q.hwm()
	if hwm <= pos || (pos == q.probedPos && hwm == q.probedHWM) {
		return
	}
	q.probing, q.probedPos, q.probedHWM = true, pos, hwm
	go func() {
		records, next, err := in.probe(q.topic, pos, hwm)
		in.mu.Lock()
		q.probing = false
		if err == nil && !records && q.fetched <= pos {
			if next <= pos {
				// Nothing committed at the position: the rest is an open transaction's
				// (read_committed stops at its first record). The Java consumer's lag
				// (last stable offset - position) is 0 then: caught up.
				next = hwm
			}
			q.clear = max(q.clear, next)
		}
		notify := in.notify
		in.mu.Unlock()
		select {
		case notify <- struct{}{}: // the worker picks again
		default:
		}
	}()
}
