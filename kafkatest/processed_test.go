package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// commit commits offsets for group as a consumer that is no group member does.
func commit(t *testing.T, c *kafkatest.Cluster, group, topic string, offsets map[int32]int64) {
	t.Helper()
	if err := commitOffsets(c, group, topic, offsets); err != nil {
		t.Fatal(err)
	}
	got, err := c.CommittedOffsets(t.Context(), group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, off := range offsets {
		if got[p] != off {
			t.Fatalf("committed %v, want %v", got, offsets)
		}
	}
}

func commitOffsets(c *kafkatest.Cluster, group, topic string, offsets map[int32]int64) error {
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		return err
	}
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return err
	}
	req := sarama.NewOffsetCommitRequest(client.Config(), group)
	for p, off := range offsets {
		req.AddBlock(topic, p, off, 0, "")
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		return err
	}
	for _, ps := range resp.Errors {
		for p, kerr := range ps {
			if kerr != sarama.ErrNoError {
				return fmt.Errorf("commit %s/%d: %w", topic, p, kerr)
			}
		}
	}
	return nil
}

// waitBriefly runs WaitProcessed with a short deadline: long enough for a few checks.
func waitBriefly(c *kafkatest.Cluster, group string, topics ...string) error {
	d := 500 * time.Millisecond
	if c.Name() != kafkatest.EmbeddedName {
		d = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.WaitProcessed(ctx, group, topics...)
}

// WaitProcessed returns when the group's committed offsets reach the end of every
// partition of every topic, and not before; transaction markers after the last record
// do not count as unprocessed.
func TestWaitProcessed(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := t.Context()
		plain, txn, group := c.Unique("plain"), c.Unique("txn"), c.Unique("app")
		for _, topic := range []string{plain, txn} {
			if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.ProduceToPartition(ctx, plain, 0, msg(plain, 0, "a"), msg(plain, 0, "b"), msg(plain, 0, "c")); err != nil {
			t.Fatal(err)
		}
		if err := c.ProduceToPartition(ctx, plain, 1, msg(plain, 1, "d")); err != nil {
			t.Fatal(err)
		}
		// txn: partition 0 holds two records and a commit marker (offsets 0-2).
		p := newTxnProducer(t, c, txnConfig(c.Unique("txn-id")))
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		if err := p.send(ctx, msg(txn, 0, "x"), msg(txn, 0, "y")); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitStable(ctx, txn); err != nil {
			t.Fatal(err)
		}

		if err := waitBriefly(c, group); err == nil || !strings.Contains(err.Error(), "no topics") {
			t.Errorf("no topics: %v", err)
		}
		err := waitBriefly(c, group, plain)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), plain) {
			t.Errorf("nothing committed: %v", err)
		}
		commit(t, c, group, plain, map[int32]int64{0: 3, 1: 0})
		if err := waitBriefly(c, group, plain); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("partition 1 not committed: %v", err)
		}
		commit(t, c, group, plain, map[int32]int64{1: 1})
		if err := waitBriefly(c, group, plain); err != nil {
			t.Errorf("all committed: %v", err)
		}
		commit(t, c, group, txn, map[int32]int64{0: 1})
		err = waitBriefly(c, group, txn, plain)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), txn) {
			t.Errorf("txn behind by one record: %v", err)
		}
		// The error names every topic behind, not just the first.
		missing := c.Unique("missing")
		err = waitBriefly(c, group, txn, plain, missing)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), txn+", "+missing+" (does not exist)") {
			t.Errorf("txn behind and a topic missing: %v", err)
		}
		// Offset 2 is the commit marker: the group, at 2, has processed every record.
		commit(t, c, group, txn, map[int32]int64{0: 2})
		if err := waitBriefly(c, group, txn, plain); err != nil {
			t.Errorf("only a marker left: %v", err)
		}
		if err := waitBriefly(c, group, plain, missing); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), missing+" (does not exist)") {
			t.Errorf("missing topic: %v", err)
		}
	})
}

// fetchesTopic reports whether an OffsetFetch request of group asks for topic.
func fetchesTopic(req kmsg.Request, group, topic string) bool {
	r := req.(*kmsg.OffsetFetchRequest)
	match := func(g string, topics []string) bool {
		return g == group && slices.Contains(topics, topic)
	}
	var ts []string
	for _, t := range r.Topics {
		ts = append(ts, t.Topic)
	}
	if match(r.Group, ts) {
		return true
	}
	for _, g := range r.Groups {
		ts = ts[:0]
		for _, t := range g.Topics {
			ts = append(ts, t.Topic)
		}
		if match(g.Group, ts) {
			return true
		}
	}
	return false
}

// A record processed from one topic may write to another that was found processed
// earlier in the same check: WaitProcessed must look again. Here "the application"
// processes the input's record, writing one to the downstream topic, just as
// WaitProcessed asks for the input's offsets, after it has found downstream (listed
// first) processed; downstream's new record must then keep it waiting.
func TestWaitProcessedLooksAgainDownstream(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := t.Context()
	input, downstream, group := c.Unique("input"), c.Unique("downstream"), c.Unique("app")
	for _, topic := range []string{input, downstream} {
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Produce(ctx, input, msg(input, 0, "a")); err != nil {
		t.Fatal(err)
	}
	commit(t, c, group, input, map[int32]int64{0: 0})
	commit(t, c, group, downstream, map[int32]int64{0: 0})

	var processed atomic.Bool
	actionErr := make(chan error, 1)
	k := c.Broker().Kfake()
	k.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !fetchesTopic(req, group, input) || processed.Swap(true) {
			return nil, nil, false
		}
		// Let other connections run while the application processes the record.
		k.SleepControl(func() {
			err := c.Produce(context.Background(), downstream, msg(downstream, 0, "a'"))
			if err == nil {
				err = commitOffsets(c, group, input, map[int32]int64{0: 1})
			}
			actionErr <- err
		})
		return nil, nil, false
	})
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := c.WaitProcessed(wctx, group, downstream, input)
	if !processed.Load() {
		t.Fatal("the input's offsets were never asked for")
	}
	if aerr := <-actionErr; aerr != nil {
		t.Fatal(aerr)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), downstream) {
		t.Fatalf("downstream has an unprocessed record: %v", err)
	}
	commit(t, c, group, downstream, map[int32]int64{0: 1})
	if err := waitBriefly(c, group, downstream, input); err != nil {
		t.Errorf("all processed: %v", err)
	}
}

// InputTopics lists the source topics and the repartition topics, each once.
func TestInputTopics(t *testing.T) {
	b := stream.NewBuilder()
	lines := stream.From(b, serde.String(), serde.String(), []string{"lines", "more-lines"})
	stream.GroupBy(lines, func(_, v string) string { return v }, serde.String(), serde.String(), stream.Named("by-line")).
		Count(stream.Materialized("counts"))
	stream.From(b, serde.String(), serde.String(), []string{"other"}).To("out", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := kafkatest.InputTopics(topo, "app")
	slices.Sort(got)
	want := []string{"app-by-line-repartition", "lines", "more-lines", "other"}
	if !slices.Equal(got, want) {
		t.Errorf("InputTopics: %v, want %v", got, want)
	}
}

// An eddy application deletes the repartition records it has committed, so a topic's
// log start can move between WaitProcessed's look at it and its read from there: the
// read is then refused (OFFSET_OUT_OF_RANGE) and WaitProcessed must look again, not
// fail. Here the application commits past all four records and deletes them just as
// WaitProcessed's first fetch from offset 0 arrives.
func TestWaitProcessedLooksAgainWhenTheLogStartMoves(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := t.Context()
	topic, group := c.Unique("repartition"), c.Unique("app")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		if err := c.Produce(ctx, topic, msg(topic, 0, v)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, c, group, topic, map[int32]int64{0: 0})

	var moved atomic.Bool
	actionErr := make(chan error, 1)
	k := c.Broker().Kfake()
	k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f := req.(*kmsg.FetchRequest)
		if len(f.Topics) == 0 || f.Topics[0].Topic != topic || moved.Swap(true) {
			return nil, nil, false
		}
		k.SleepControl(func() {
			err := commitOffsets(c, group, topic, map[int32]int64{0: 4})
			if err == nil {
				err = deleteRecords(c, topic, 0, 4)
			}
			actionErr <- err
		})
		return nil, nil, false
	})
	err := waitBriefly(c, group, topic)
	if !moved.Load() {
		t.Fatal("WaitProcessed never read the topic")
	}
	if aerr := <-actionErr; aerr != nil {
		t.Fatal(aerr)
	}
	if err != nil {
		t.Errorf("every record processed, the log start moved during a check: %v", err)
	}
}

func deleteRecords(c *kafkatest.Cluster, topic string, partition int32, before int64) error {
	admin, err := sarama.NewClusterAdmin(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	return admin.DeleteRecords(topic, map[int32]int64{partition: before})
}
