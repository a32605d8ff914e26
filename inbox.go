package eddy

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// inboxLimit bounds the records buffered per source partition of a task. A full queue
// blocks its claim, which stops sarama fetching that partition.
const inboxLimit = 4096

// inbox buffers the records the claims of a task deliver, one queue per source topic
// (the task's partition of it), and hands them to the task in timestamp order across
// its partitions. Records below the task's committed offsets are dropped (a claim may
// still deliver them after a recovery).
type inbox struct {
	mu        sync.Mutex
	queues    map[string]*queue
	list      []*queue // the queues in creation order, for pop's scan
	committed *committedOffsets
	// idle is Config.MaxTaskIdle: how long the task waits for a record on an empty queue
	// whose claim has delivered everything it knows of before processing the other
	// queues past it; 0 waits only for records known to be on the broker, a negative
	// idle never waits (see pick).
	idle time.Duration
	// behindWait bounds the wait for a queue whose claim is behind its high-water mark
	// (behindWait, the constant, outside tests).
	behindWait time.Duration
	// enforced, when set, is told each time the task processes past an empty queue
	// whose wait ran out (once per silence of the queue): topic, how long it waited,
	// and whether its claim was still behind its high-water mark.
	enforced func(topic string, waited time.Duration, behind bool)
	// probe, when set, reads what lies in [from, end) of topic's partition, as a
	// read_committed consumer would: whether there are records, and the offset past
	// what it read (markers and aborted records included). It runs on a goroutine of its
	// own; see maybeProbe.
	probe  func(topic string, from, end int64) (records bool, next int64, err error)
	clock  func() time.Time
	open   bool
	notify chan struct{} // signalled when a record arrives
}

type queue struct {
	topic    string
	msgs     []*sarama.ConsumerMessage
	head     int
	space    chan struct{} // signalled when a record leaves
	position int64         // the offset after the last record handed out
	hwm      func() int64  // the claim's high-water mark
	started  bool          // the claim has started (start was called)
	// fetched is the offset after the last record the claim delivered, or where the
	// claim starts: the claim is behind while its high-water mark is above it.
	fetched int64
	// emptySince is when the queue was first seen empty since its last record (zero:
	// it has records), for the idle time.
	emptySince time.Time
	// enforcedDone: the task was processed past the queue in its present silence.
	enforcedDone bool
	// clear is an offset up to which a probe found nothing the claim will deliver
	// (transaction markers, aborted records) or beyond which nothing is committed yet
	// (an open transaction): the claim is behind only while its high-water mark is
	// above both fetched and clear. probing is set while a probe runs; probedPos and
	// probedHWM are the state it was started for (no second probe for the same).
	clear                int64
	probing              bool
	probedPos, probedHWM int64
}

// behindWait bounds how long a task waits for a record on an empty queue whose claim
// is behind its high-water mark. The gap may be records the next fetch brings (wait
// for them: Kafka Streams' default) or nothing the task will ever see: a transaction's
// commit or abort marker (every transactional write leaves one at the end, so the
// high-water mark stays one above the last record), the records of aborted
// transactions, or those of a transaction still open (read_committed stops at the last
// stable offset). sarama's claim reports neither the last stable offset nor the
// position past the markers, which the Java consumer's lag (KIP-695) uses, so the task
// probes the gap (inbox.probe: one read_committed Fetch from the position, on the
// restore client) while it waits, and stops waiting when the gap holds no record it
// will ever be given: then, as by the Java consumer's lag, it is caught up. A gap with
// records (or a claim not started, or a probe that failed) is waited for as Kafka
// Streams waits, but not for ever: a claim that does not deliver must not stop the
// task's other partitions. 5 s is many fetch round trips (the broker answers at once
// when there is data; a claim held up by a full queue of another partition costs
// Consumer.MaxProcessingTime, 100 ms, per fetch): 1 s ran out on the embedded broker
// on a machine with a load of 24 on 2 cores, before a table's first fetch came, and
// 482 of 4,000 joins missed their table version (TestJoinWaitsForTableRecordsOnTheBroker).
const behindWait = 5 * time.Second

func newInbox(committed *committedOffsets, idle time.Duration) *inbox {
	return &inbox{queues: map[string]*queue{}, committed: committed, idle: idle, behindWait: behindWait, clock: time.Now, notify: make(chan struct{}, 1)}
}

// reset empties the inbox for a new session and opens it with a queue for each of
// topics, the task's source topics: a queue whose claim has not started yet counts as
// behind, so the task does not process one topic's records while another's claim is
// still being created (sarama starts the claims of a session concurrently).
func (in *inbox) reset(topics ...string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.queues = map[string]*queue{}
	in.list = nil
	in.open = true
	for _, topic := range topics {
		in.queue(topic)
	}
}

// notifyOn makes the inbox signal c when a record arrives (a worker running several
// tasks waits on one channel for all of them).
func (in *inbox) notifyOn(c chan struct{}) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.notify = c
}

// close drops everything and makes push a no-op, so claims never block on a task that
// stopped.
func (in *inbox) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.open = false
	for _, q := range in.queues {
		q.msgs, q.head = nil, 0
		select {
		case q.space <- struct{}{}:
		default:
		}
	}
}

func (in *inbox) queue(topic string) *queue {
	q := in.queues[topic]
	if q == nil {
		q = &queue{topic: topic, space: make(chan struct{}, 1)}
		in.queues[topic] = q
		in.list = append(in.list, q)
	}
	return q
}

// start records where the claim of topic starts; hwm reports the claim's high-water
// mark. offset may be sarama.OffsetOldest (no committed offset): the claim then starts
// at the log start, taken as 0 here (a partition whose old records were deleted looks
// behind until its first record arrives, a wait bounded by behindWait).
func (in *inbox) start(topic string, offset int64, hwm func() int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	q := in.queue(topic)
	q.position, q.hwm, q.started = offset, hwm, true
	q.fetched = max(offset, 0)
	if offset == sarama.OffsetNewest && hwm != nil {
		q.fetched = hwm() // the claim starts at the high-water mark it read
	}
}

// lag returns, per topic, the records between the last one handed out and the claim's
// high-water mark. Transaction markers count, so an idle partition of a transactional
// topic shows a lag of about one.
func (in *inbox) lag() map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int64{}
	for topic, q := range in.queues {
		if q.hwm == nil {
			continue
		}
		if h := q.hwm(); h > 0 && q.position >= 0 {
			out[topic] = max(0, h-q.position)
		}
	}
	return out
}

// push adds a record, waiting while its queue is full; it gives up when ctx ends or
// the inbox is closed, and then reports false: the caller must push no later record of
// that partition, or the task would process past a record it never saw.
func (in *inbox) push(ctx context.Context, msg *sarama.ConsumerMessage) bool {
	for {
		in.mu.Lock()
		if !in.open {
			in.mu.Unlock()
			return false
		}
		q := in.queue(msg.Topic)
		if len(q.msgs)-q.head < inboxLimit {
			q.msgs = append(q.msgs, msg)
			q.fetched = max(q.fetched, msg.Offset+1)
			notify := in.notify
			in.mu.Unlock()
			select {
			case notify <- struct{}{}:
			default:
			}
			return true
		}
		space := q.space
		in.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return false
		}
	}
}

// forwardClaim hands a claim's records to in, in order, until the claim ends or ctx or
// rejoin is done. Once the inbox did not take a record (the session ending while the
// queue is full, or the task closed), it hands over none after it and only drains the
// claim: carrying on with the next record would leave a gap that the task processes
// past, and commits. A long run lost one input record so: the session ended while the
// task's queue was full; the push of record n gave up, the loop then took record n+1
// from the claim (select picks at random among ready cases), the worker had meanwhile
// made room, n+1 went in, and the commit at the end of the session covered n without
// its output (eos-verify, seed 1796185285269984653).
func forwardClaim(ctx context.Context, rejoin <-chan struct{}, msgs <-chan *sarama.ConsumerMessage, in *inbox) {
	var d detacher
	pushing := in != nil // a claim of an unknown task is drained
	for {
		select {
		case msg, ok := <-msgs:
			if !ok {
				return
			}
			if pushing {
				d.detach(msg)
				pushing = in.push(ctx, msg)
			}
		case <-ctx.Done():
			return
		case <-rejoin:
			// Returning ends the session; the consume loop joins again.
			return
		}
	}
}

// pop returns the next record: the head with the smallest timestamp among the queues
// (ties: by topic name; see pick for the idle time), skipping records below the
// committed offset.
func (in *inbox) pop() (*sarama.ConsumerMessage, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := in.clock()
	for {
		best := in.pick(now)
		if best == nil {
			return nil, false
		}
		m := best.msgs[best.head]
		best.msgs[best.head] = nil
		best.head++
		if best.head == len(best.msgs) {
			best.msgs, best.head = best.msgs[:0], 0
		} else if best.head > 1024 && best.head*2 > len(best.msgs) {
			best.msgs = append(best.msgs[:0], best.msgs[best.head:]...)
			best.head = 0
		}
		select {
		case best.space <- struct{}{}:
		default:
		}
		if m.Offset < in.committed.of(best.topic) {
			continue
		}
		best.position = m.Offset + 1
		return m, true
	}
}
