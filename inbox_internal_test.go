package eddy

import (
	"context"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
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

// With the default MaxTaskIdle (0), a task waits for an empty partition while its claim
// is behind its high-water mark (records known to be on the broker: Kafka Streams'
// default, KIP-695), at most behindWait (the gap may be a transaction marker), and not
// at all for a partition its claim has delivered up to the high-water mark. A negative
// MaxTaskIdle never waits; a task of one partition never waits.
func TestInboxWaitsWhileAPartitionIsBehind(t *testing.T) {
	now := time.Unix(1000, 0)
	ctx := context.Background()
	type gaveUp struct {
		topic  string
		behind bool
	}
	newIn := func(idle time.Duration, topics ...string) (*inbox, *[]gaveUp) {
		in := newInbox(newCommittedOffsets(), idle)
		in.clock = func() time.Time { return now }
		var events []gaveUp
		in.enforced = func(topic string, _ time.Duration, behind bool) { events = append(events, gaveUp{topic, behind}) }
		in.reset(topics...)
		return in, &events
	}
	var hwmB int64 = 3
	in, events := newIn(0, "a", "b")
	in.start("a", 0, func() int64 { return 1 })
	// b's claim has not started: a waits for it.
	in.push(ctx, msg("a", 0, 50))
	if m, ok := in.pop(); ok {
		t.Fatalf("b's claim has not started: popped %s@%d", m.Topic, m.Offset)
	}
	in.start("b", 0, func() int64 { return hwmB })
	now = now.Add(behindWait - time.Millisecond)
	if m, ok := in.pop(); ok {
		t.Fatalf("b's claim is behind its high-water mark (0 < 3): popped %s@%d before behindWait", m.Topic, m.Offset)
	}
	// b's records arrive; all older than a's head: processed first, in timestamp order.
	for off := range int64(3) {
		in.push(ctx, msg("b", off, 10+off))
	}
	var got []string
	for range 3 {
		m, ok := in.pop()
		if !ok {
			t.Fatalf("after %v: nothing popped", got)
		}
		got = append(got, fmt.Sprintf("%s%d", m.Topic, m.Offset))
	}
	// b is empty and its claim has delivered up to its high-water mark: a goes on at once.
	if m, ok := in.pop(); !ok || m.Topic != "a" {
		t.Fatalf("after %v: got %v %v, want a0 at once (b caught up)", got, m, ok)
	}
	if len(*events) != 0 {
		t.Errorf("no wait ran out, yet enforced processing was reported: %v", *events)
	}
	// A marker (or a new record) on b: its high-water mark is one above. a's next
	// record waits behindWait, then goes, reported once.
	hwmB = 4
	in.push(ctx, msg("a", 1, 60))
	if _, ok := in.pop(); ok {
		t.Fatal("b is behind again: a must wait")
	}
	now = now.Add(behindWait)
	if m, ok := in.pop(); !ok || m.Offset != 1 {
		t.Fatalf("after behindWait: %v %v, want a1", m, ok)
	}
	in.push(ctx, msg("a", 2, 70))
	if m, ok := in.pop(); !ok || m.Offset != 2 {
		t.Fatalf("b still silent: a goes on without waiting again; got %v %v", m, ok)
	}
	if want := []gaveUp{{"b", true}}; fmt.Sprint(*events) != fmt.Sprint(want) {
		t.Errorf("enforced processing reported %v, want %v", *events, want)
	}

	// A negative MaxTaskIdle never waits, behind or not.
	never, events := newIn(-1, "a", "b")
	never.start("a", 0, func() int64 { return 1 })
	never.start("b", 0, func() int64 { return 100 })
	never.push(ctx, msg("a", 0, 50))
	if _, ok := never.pop(); !ok {
		t.Error("MaxTaskIdle < 0: a's record must be popped at once")
	}
	if len(*events) != 0 {
		t.Errorf("MaxTaskIdle < 0 reported enforced processing: %v", *events)
	}

	// One partition: nothing to wait for.
	one, _ := newIn(0, "a")
	one.start("a", 0, func() int64 { return 100 })
	one.push(ctx, msg("a", 0, 50))
	if _, ok := one.pop(); !ok {
		t.Error("a task of one partition must not wait")
	}

	// A claim that starts at the newest offset starts at its high-water mark: caught up.
	latest, _ := newIn(0, "a", "b")
	latest.start("a", 0, func() int64 { return 1 })
	latest.start("b", sarama.OffsetNewest, func() int64 { return 42 })
	latest.push(ctx, msg("a", 0, 50))
	if _, ok := latest.pop(); !ok {
		t.Error("b starts at its end (OffsetNewest): a must not wait")
	}
}

// A session's claims start concurrently (sarama creates each, with its ListOffsets
// round trips, in its own goroutine): a task reading two topics must not process the
// records of the first claim to start before the other's exists. beginSession gives
// the inbox a queue per source topic, waited for until its claim starts.
func TestTaskWaitsForEveryClaimOfItsSession(t *testing.T) {
	g := graph.Of(joinTopology(t)) // sub-topology 0 reads "left" and "right"
	tr := newTaskRunner(nil, taskSettings{appID: "app", graph: g, logger: slog.New(slog.DiscardHandler)}, processor.TaskID{Subtopology: 0, Partition: 0})
	tr.beginSession()
	tr.claim("left", 0, func() int64 { return 1 })
	tr.inbox.push(context.Background(), msg("left", 0, 10))
	if m, ok := tr.inbox.pop(); ok {
		t.Fatalf("the claim of right has not started: popped %s@%d", m.Topic, m.Offset)
	}
	tr.claim("right", 0, func() int64 { return 0 }) // an empty partition: caught up
	if m, ok := tr.inbox.pop(); !ok || m.Topic != "left" {
		t.Fatalf("both claims started, right caught up: got %v %v, want left's record", m, ok)
	}
}

// While a task waits for an empty partition behind its high-water mark it probes the
// gap (one read_committed Fetch): a gap of transaction markers or aborted records, or
// one beyond the last stable offset (an open transaction), ends the wait at once, as
// the Java consumer's lag (last stable offset - position past the markers) would be 0;
// a gap holding records keeps it, up to behindWait.
func TestInboxProbeEndsTheWaitBehindMarkers(t *testing.T) {
	now := time.Unix(1000, 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		records bool
		next    int64 // what the probe of [3, 5) reports
		wait    bool  // whether a still waits after the probe
	}{
		{"markers", false, 5, false},
		{"open transaction", false, 3, false},
		{"records", true, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInbox(newCommittedOffsets(), 0)
			in.clock = func() time.Time { return now }
			probed := make(chan [2]int64, 1)
			in.probe = func(topic string, from, end int64) (bool, int64, error) {
				if topic != "b" {
					t.Errorf("probed %s", topic)
				}
				probed <- [2]int64{from, end}
				return tc.records, tc.next, nil
			}
			in.reset("a", "b")
			in.start("a", 0, func() int64 { return 1 })
			in.start("b", 0, func() int64 { return 5 })
			for off := range int64(3) {
				in.push(ctx, msg("b", off, off))
			}
			in.push(ctx, msg("a", 0, 50))
			<-in.notify   // the pushes' signal: the next is the probe's
			for range 3 { // b's records, older
				if m, ok := in.pop(); !ok || m.Topic != "b" {
					t.Fatalf("got %v %v, want b's records first", m, ok)
				}
			}
			if _, ok := in.pop(); ok { // b empty at 3, high-water mark 5: wait, and probe
				t.Fatal("b is behind: a must wait")
			}
			select {
			case got := <-probed:
				if got != [2]int64{3, 5} {
					t.Fatalf("probed [%d, %d), want [3, 5)", got[0], got[1])
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no probe of b's gap")
			}
			select {
			case <-in.notify: // the probe's result is in
			case <-time.After(5 * time.Second):
				t.Fatal("the probe did not wake the worker")
			}
			_, ok := in.pop()
			if ok == tc.wait {
				t.Fatalf("after the probe: a popped %v, want %v (records in the gap: %v)", ok, !tc.wait, tc.records)
			}
			if tc.wait {
				if _, ok := in.pop(); ok {
					t.Fatal("popped again")
				}
				if len(probed) != 0 {
					t.Error("probed the same gap twice")
				}
				now = now.Add(behindWait)
				if _, ok := in.pop(); !ok {
					t.Fatal("after behindWait a must go")
				}
			}
		})
	}
}
