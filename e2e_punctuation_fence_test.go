package eddy_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

type wallTicker struct{}

func (wallTicker) Process(processor.Record[string, string]) error { return nil }
func (wallTicker) Close() error                                   { return nil }
func (wallTicker) Init(ctx processor.Context[string, string]) error {
	_, err := ctx.Schedule(100*time.Millisecond, processor.WallClockTime, func(now time.Time) error {
		return ctx.Forward(processor.Record[string, string]{Key: "tick", Value: now.String(), Timestamp: now})
	})
	return err
}

// Every transaction a worker commits carries a TxnOffsetCommit with the group's
// generation (KIP-447), so a zombie is fenced even when its transaction holds only a
// wall-clock punctuator's output. The input topic is empty and has no committed offset:
// no task consumed anything, and none has an offset to send; on main such transactions
// committed with no TxnOffsetCommit at all (nothing fenced them by generation: a zombie
// whose tasks had moved could still commit its punctuations). The broker's requests are
// observed (kfake): a committing EndTxn of the application's producers must follow a
// TxnOffsetCommit of the same transaction. On both brokers, the group's committed
// offsets of the input (none on main) show the offsets went with the transactions.
func TestPunctuationOnlyTxnCommitsOffsets(t *testing.T) {
	kafkatest.ForEachCluster(t, testPunctuationOnlyTxnCommitsOffsets)
}

func testPunctuationOnlyTxnCommitsOffsets(t *testing.T, c *kafkatest.Cluster) {
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	bld := topology.NewBuilder()
	topology.AddSource(bld, "in", serde.String(), serde.String(), in)
	topology.AddProcessor(bld, "tick", func() processor.Processor[string, string, string, string] { return wallTicker{} }, "in")
	topology.AddSink(bld, "out", out, serde.String(), serde.String(), "tick")
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	appID := c.Unique("punct")

	var mu sync.Mutex
	offsetsSent := map[string]bool{} // transactional ID → a TxnOffsetCommit in its open transaction
	commits, unfenced := 0, 0
	if b := c.Broker(); b != nil {
		k := b.Kfake()
		k.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			k.KeepControl()
			r := req.(*kmsg.TxnOffsetCommitRequest)
			mu.Lock()
			defer mu.Unlock()
			if r.Group == appID && r.Generation > 0 && r.MemberID != "" {
				offsetsSent[r.TransactionalID] = true
			}
			return nil, nil, false
		})
		k.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			k.KeepControl()
			r := req.(*kmsg.EndTxnRequest)
			mu.Lock()
			defer mu.Unlock()
			if strings.HasPrefix(r.TransactionalID, appID) && r.Commit {
				commits++
				if !offsetsSent[r.TransactionalID] {
					unfenced++
				}
			}
			delete(offsetsSent, r.TransactionalID)
			return nil, nil, false
		})
	}

	inst := start(t, topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
	waitFor(t, 30*time.Second, "punctuations committed", func() (bool, error) {
		msgs, err := c.ReadCommitted(ctx, out)
		return len(msgs) >= 10, err
	})
	if err := inst.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	committed, err := c.CommittedOffsets(ctx, appID, in)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, off := range committed {
		if off >= 0 { // -1: none
			n++
		}
	}
	if n == 0 {
		t.Errorf("the group has no committed offset of %s after committed punctuations: their transactions carried no TxnOffsetCommit", in)
	}
	if c.Broker() == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if commits == 0 || unfenced > 0 {
		t.Fatalf("%d of %d committed transactions (punctuation output only) sent no TxnOffsetCommit with the group's generation; want none", unfenced, commits)
	}
}
