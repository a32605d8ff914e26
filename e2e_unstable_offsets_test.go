package eddy_test

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// unstableOffsetFetch makes the embedded broker answer every OffsetFetch that asks for
// stable offsets with UNSTABLE_OFFSET_COMMIT on every partition while on is set, as
// Kafka 4.1.1 did for ten minutes after a broker kill -9 (groupunstable.go).
func unstableOffsetFetch(b *kafkatest.Broker, on *atomic.Bool) {
	k := b.Kfake()
	k.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.OffsetFetchRequest)
		if !on.Load() || !r.RequireStable {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		const unstable = 88 // UNSTABLE_OFFSET_COMMIT
		if r.Version >= 8 {
			for _, g := range r.Groups {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group = g.Group
				for _, t := range g.Topics {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic, rt.TopicID = t.Topic, t.TopicID
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.ErrorCode = p, -1, unstable
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
				resp.Groups = append(resp.Groups, rg)
			}
			return resp, nil, true
		}
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, unstable
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

// TestUnstableOffsetsPastTheTransactionTimeoutAreAnError: when the group coordinator
// keeps answering UNSTABLE_OFFSET_COMMIT longer than any transaction stays open, no
// member can start and nothing is processed; the runtime says so as an error naming
// the group, the time and what to do (restart the coordinating broker), instead of
// rejoin warnings alone, and goes on once the coordinator answers again. Kills the
// mutant "no report" (no error line) and, through the output, "gives up".
func TestUnstableOffsetsPastTheTransactionTimeoutAreAnError(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ProduceToPartition(ctx, in, 0, &sarama.ProducerMessage{Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder("v")}); err != nil {
		t.Fatal(err)
	}
	var on atomic.Bool
	on.Store(true)
	unstableOffsetFetch(b, &on)
	logs := newLogCapture()
	appID := c.Unique("unstable")
	app, err := eddy.New(passTopology(t, in, out), eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	eddy.SetUnstableAfter(app, time.Millisecond)
	inst := run(t, app)

	waitFor(t, time.Minute, "the error about unstable offsets", func() (bool, error) {
		return len(logs.grep("ERROR", "UNSTABLE_OFFSET_COMMIT", "Restart the broker", "group="+appID)) > 0, nil
	})
	if got := logs.grep("ERROR", "UNSTABLE_OFFSET_COMMIT"); len(got) > 1 {
		t.Errorf("%d errors within a minute, want one a minute: %q", len(got), got)
	}
	if msgs, err := c.ReadCommitted(ctx, out); err != nil || len(msgs) != 0 {
		t.Fatalf("output while no member could start: %d records (err %v)", len(msgs), err)
	}
	on.Store(false)
	waitFor(t, time.Minute, "the record once the coordinator answers again", func() (bool, error) {
		if err, done := inst.exited(); done {
			t.Fatalf("Run returned %v", err)
		}
		msgs, err := c.ReadCommitted(ctx, out)
		return len(msgs) == 1, err
	})
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}

// clearOnAbortWithGroupOffsets makes the embedded broker end the unstable answers of
// unstableOffsetFetch (on) as Kafka's group coordinator drops a producer ID's pending
// offset commits: when a transaction that added group's offsets (AddOffsetsToTxn)
// aborts (EndTxn). It returns the transactional ID that did it, once one has.
func clearOnAbortWithGroupOffsets(b *kafkatest.Broker, group string, on *atomic.Bool) *atomic.Pointer[string] {
	k := b.Kfake()
	var mu sync.Mutex
	added := map[string]int16{} // transactional ID -> producer epoch of its transaction with the group's offsets
	var by atomic.Pointer[string]
	k.ControlKey(int16(kmsg.AddOffsetsToTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if r := req.(*kmsg.AddOffsetsToTxnRequest); r.Group == group {
			mu.Lock()
			added[r.TransactionalID] = r.ProducerEpoch
			mu.Unlock()
		}
		return nil, nil, false
	})
	k.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		epoch, ok := added[r.TransactionalID]
		mu.Unlock()
		if ok && epoch == r.ProducerEpoch && !r.Commit && on.Load() {
			id := r.TransactionalID
			by.Store(&id)
			on.Store(false)
		}
		return nil, nil, false
	})
	return &by
}

// TestUnstableOffsetsAreClearedByEachWorkersAbort: Kafka 4.1.1's group coordinator can
// keep a pending offset commit of a transaction that ended, keyed by the producer ID of
// the partition's last owner, until an end marker of that producer ID reaches the
// group's __consumer_offsets partition (docs/kafka-notes.md, "The group coordinator
// after a restart"). The embedded broker plays that coordinator: it answers
// UNSTABLE_OFFSET_COMMIT until a transaction that added the group's offsets aborts. Past
// the transaction timeout the runtime runs such a transaction for each worker's
// transactional ID, and the record comes through with nobody restarting anything. Kills
// the mutant "no clearing" (the record never comes).
func TestUnstableOffsetsAreClearedByEachWorkersAbort(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(2) {
		if err := c.ProduceToPartition(ctx, in, p, &sarama.ProducerMessage{Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder("v")}); err != nil {
			t.Fatal(err)
		}
	}
	appID := c.Unique("unstable-clear")
	var on atomic.Bool
	on.Store(true)
	unstableOffsetFetch(b, &on)
	by := clearOnAbortWithGroupOffsets(b, appID, &on)
	logs := newLogCapture()
	app, err := eddy.New(passTopology(t, in, out), eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Workers: 2, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	eddy.SetUnstableAfter(app, time.Millisecond)
	inst := run(t, app)

	waitFor(t, time.Minute, "both records once a worker's abort cleared the pending commit", func() (bool, error) {
		if err, done := inst.exited(); done {
			t.Fatalf("Run returned %v", err)
		}
		msgs, err := c.ReadCommitted(ctx, out)
		return len(msgs) == 2, err
	})
	if id := by.Load(); id == nil || !strings.HasPrefix(*id, appID) {
		t.Errorf("cleared by %v, want one of the app's transactional IDs", id)
	}
	if got := logs.grep("WARN", "aborted a transaction that adds the group's offsets", "group="+appID); len(got) == 0 {
		t.Error("no log line says the runtime aborted its workers' transactions")
	}
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}
