package eddy

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func msg(topic string, offset int64, ts int64) *sarama.ConsumerMessage {
	return &sarama.ConsumerMessage{Topic: topic, Offset: offset, Timestamp: time.UnixMilli(ts)}
}

// The committed offset of a topic is the largest of the claim's start, the task's
// commits and its offsets record, and it never moves back within the task's life: not
// when a coordinator answers a stale offset to a later claim, not across sessions.
func TestCommittedOffsetsNeverMoveBack(t *testing.T) {
	c := newCommittedOffsets()
	if known := c.claim("a", 10); known != -1 {
		t.Fatalf("first claim: known %d, want -1", known)
	}
	if got := c.of("a"); got != 10 {
		t.Fatalf("after the claim: %d, want 10", got)
	}
	c.advance("a", 25)
	c.advance("a", 20) // older: ignored
	if got := c.of("a"); got != 25 {
		t.Fatalf("after commits 25 then 20: %d, want 25", got)
	}
	c.newSession() // a new session of the same task
	if known := c.claim("a", 3); known != 25 {
		t.Errorf("a stale claim: known %d, want 25 (for the warning)", known)
	}
	if got := c.of("a"); got != 25 {
		t.Errorf("a new session's stale claim moved the start back to %d, want 25", got)
	}
	c.advance("a", 30)
	if got := c.of("a"); got != 30 {
		t.Errorf("record 30: %d", got)
	}
	c.forget("a") // the topic was recreated: only this session's claim counts
	if got := c.of("a"); got != 3 {
		t.Errorf("after forget: %d, want the claim's 3", got)
	}
	if got := c.of("unknown"); got != -1 {
		t.Errorf("a topic with no start: %d, want -1", got)
	}
}

// pop hands out records in timestamp order across the task's partitions (ties by topic)
// and drops those below the committed offset.
func TestInboxPopOrdersAndSkipsCommitted(t *testing.T) {
	c := newCommittedOffsets()
	in := newInbox(c, 0)
	in.reset()
	in.start("a", 0, nil)
	in.start("b", 0, nil)
	c.advance("b", 2)
	ctx := context.Background()
	for _, m := range []*sarama.ConsumerMessage{msg("a", 0, 5), msg("a", 1, 9), msg("a", 2, 9)} {
		in.push(ctx, m)
	}
	for _, m := range []*sarama.ConsumerMessage{msg("b", 1, 1), msg("b", 2, 9), msg("b", 3, 2)} {
		in.push(ctx, m)
	}
	var got []string
	for {
		m, ok := in.pop()
		if !ok {
			break
		}
		got = append(got, m.Topic+string(rune('0'+m.Offset)))
	}
	// b1 is below b's committed offset 2. Heads: a0(5) b2(9) → a0; a1(9) b2(9) → a1 (tie:
	// topic a first); a2(9) b2(9) → a2; then b2, b3.
	want := []string{"a0", "a1", "a2", "b2", "b3"}
	if len(got) != len(want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("popped %v, want %v", got, want)
		}
	}
	if n := in.lag(); len(n) != 0 {
		t.Errorf("lag without high-water marks: %v", n)
	}
}

// A closed inbox drops pushes instead of blocking its claim.
func TestInboxClosedDropsPushes(t *testing.T) {
	in := newInbox(newCommittedOffsets(), 0)
	in.reset()
	in.close()
	done := make(chan struct{})
	go func() {
		for i := range inboxLimit + 10 {
			in.push(context.Background(), msg("a", int64(i), 0))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("push blocked on a closed inbox")
	}
	if _, ok := in.pop(); ok {
		t.Error("a closed inbox handed out a record")
	}
}

// With an idle time (Config.MaxTaskIdle, Kafka Streams' max.task.idle.ms) a task whose
// other partition is empty waits up to that long before processing past it; a record
// arriving there in time is processed in timestamp order; once the partition waited
// the idle time, the others are processed past it until it gets a record again.
func TestInboxIdleWaitsForAnEmptyPartition(t *testing.T) {
	now := time.Unix(1000, 0)
	in := newInbox(newCommittedOffsets(), 500*time.Millisecond)
	in.clock = func() time.Time { return now }
	in.reset()
	in.start("a", 0, nil)
	in.start("b", 0, nil)
	ctx := context.Background()
	in.push(ctx, msg("a", 0, 20))
	if m, ok := in.pop(); ok {
		t.Fatalf("b is empty and has not waited: popped %s@%d", m.Topic, m.Offset)
	}
	now = now.Add(300 * time.Millisecond)
	in.push(ctx, msg("b", 0, 10)) // arrives within the idle time, older than a's head
	if m, ok := in.pop(); !ok || m.Topic != "b" {
		t.Fatalf("popped %v %v, want b's record first (timestamp order)", m, ok)
	}
	// b is empty again: a waits for it afresh, then goes on alone.
	if _, ok := in.pop(); ok {
		t.Fatal("b emptied again: a must wait")
	}
	now = now.Add(499 * time.Millisecond)
	if _, ok := in.pop(); ok {
		t.Fatal("popped before the idle time passed")
	}
	now = now.Add(time.Millisecond)
	if m, ok := in.pop(); !ok || m.Topic != "a" {
		t.Fatalf("after the idle time: %v %v, want a's record", m, ok)
	}
	in.push(ctx, msg("a", 1, 30))
	if m, ok := in.pop(); !ok || m.Offset != 1 {
		t.Fatalf("b still silent: a goes on without waiting again; got %v %v", m, ok)
	}

	// Without an idle time the task never waits.
	in0 := newInbox(newCommittedOffsets(), 0)
	in0.reset()
	in0.start("a", 0, nil)
	in0.start("b", 0, nil)
	in0.push(ctx, msg("a", 0, 20))
	if _, ok := in0.pop(); !ok {
		t.Fatal("no idle time: a's record must be popped at once")
	}
}

// A session that ends while a task's queue is full: the push of record n gives up, and
// the claim must hand over nothing after it. The claim loop used to go on: it took n+1
// from the claim (select picks at random among ready cases), the worker had made room
// meanwhile, n+1 went in, and the task processed past n and committed it — one input
// record lost in a long run on real Kafka (seed 1796185285269984653). On one P, the
// worker's pop right after the cancel makes room before the claim's goroutine runs
// again: its push of n returns (woken by the cancel) with room in the queue, and the
// old loop then had an even chance per round to push n+1; 40 rounds make a pass by
// luck 1 in 10^12.
func TestForwardClaimLeavesNoGapWhenAPushGivesUp(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	for round := range 40 {
		in := newInbox(newCommittedOffsets(), 0)
		in.reset()
		msg := func(off int64) *sarama.ConsumerMessage {
			return &sarama.ConsumerMessage{Topic: "in", Offset: off, Value: []byte("v")}
		}
		for off := range int64(inboxLimit) {
			if !in.push(context.Background(), msg(off)) {
				t.Fatal("push into a queue with room gave up")
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		claim := make(chan *sarama.ConsumerMessage, 2)
		claim <- msg(inboxLimit)
		claim <- msg(inboxLimit + 1)
		done := make(chan struct{})
		go func() { forwardClaim(ctx, nil, claim, in); close(done) }()
		time.Sleep(time.Millisecond) // the claim blocks pushing record inboxLimit into the full queue
		cancel()
		if _, ok := in.pop(); !ok { // the worker makes room
			t.Fatal("empty inbox")
		}
		<-done
		next := int64(1)
		for {
			m, ok := in.pop()
			if !ok {
				break
			}
			if m.Offset != next {
				t.Fatalf("round %d: the task gets offset %d after %d: a gap it would process past and commit", round, m.Offset, next-1)
			}
			next++
		}
	}
}
