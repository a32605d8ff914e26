package kafkatest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

type item struct {
	Name  string `json:"name"`
	Price int64  `json:"price"`
}

// Typed records written with ProduceTyped come back equal from ReadCommittedTyped, with
// their timestamps, headers and tombstones, and land where the raw bytes say.
func TestProduceAndReadTyped(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := t.Context()
	topic := c.Unique("items")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1_700_000_000_123)
	values := serde.Nullable(serde.JSON[item]())
	in := []processor.Record[string, *item]{
		{Key: "a", Value: &item{"apple", 120}, Timestamp: ts, Headers: []processor.Header{{Key: "h", Value: []byte("v")}}},
		{Key: "b", Value: &item{"bread", 250}, Timestamp: ts.Add(time.Second)},
		{Key: "a", Value: nil, Timestamp: ts.Add(2 * time.Second)},
	}
	if err := kafkatest.ProduceTyped(ctx, c, topic, serde.String(), values, in...); err != nil {
		t.Fatal(err)
	}
	raw, err := c.ReadCommitted(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 3 || string(raw[0].Key) != "a" || string(raw[0].Value) != `{"name":"apple","price":120}` || raw[2].Value != nil {
		t.Fatalf("raw records: %v", raw)
	}
	got, err := kafkatest.ReadCommittedTyped(ctx, c, topic, serde.String(), values)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d records, want %d", len(got), len(in))
	}
	for i, r := range got {
		w := in[i]
		if r.Key != w.Key || (r.Value == nil) != (w.Value == nil) || (r.Value != nil && *r.Value != *w.Value) ||
			!r.Timestamp.Equal(w.Timestamp) || r.Offset != int64(i) || r.Partition != 0 || len(r.Headers) != len(w.Headers) {
			t.Errorf("record %d: %+v, want %+v at offset %d", i, r, w, i)
		}
	}
	if h := got[0].Headers; len(h) != 1 || h[0].Key != "h" || string(h[0].Value) != "v" {
		t.Errorf("headers %v", h)
	}
}

// A record that does not deserialize fails the read with its place and the serde's
// error; a value that does not serialize fails the produce.
func TestReadTypedBadRecord(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := t.Context()
	topic := c.Unique("items")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	err := c.Produce(ctx, topic,
		&sarama.ProducerMessage{Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder(`{"name":"x"}`)},
		&sarama.ProducerMessage{Key: sarama.StringEncoder("b"), Value: sarama.StringEncoder(`not json`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kafkatest.ReadCommittedTyped(ctx, c, topic, serde.String(), serde.JSON[item]())
	var se *serde.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "partition 0 offset 1: value") {
		t.Errorf("bad record: %v", err)
	}
	bad := serde.Funcs("Failing", func(string, int) ([]byte, error) { return nil, errors.New("boom") }, nil)
	err = kafkatest.ProduceTyped(ctx, c, topic, serde.String(), bad, processor.Record[string, int]{Key: "k"})
	if err == nil || !strings.Contains(err.Error(), "record 0: value:") || !strings.HasSuffix(err.Error(), "boom") {
		t.Errorf("unserializable value: %v", err)
	}
}

// commit commits offsets for group as a consumer that is no group member does.
func commit(t *testing.T, c *kafkatest.Cluster, group, topic string, offsets map[int32]int64) {
	t.Helper()
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	req := sarama.NewOffsetCommitRequest(client.Config(), group)
	for p, off := range offsets {
		req.AddBlock(topic, p, off, 0, "")
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range resp.Errors {
		for p, kerr := range ps {
			if kerr != sarama.ErrNoError {
				t.Fatalf("commit partition %d: %v", p, kerr)
			}
		}
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

// waitBriefly runs WaitProcessed with a short deadline.
func waitBriefly(c *kafkatest.Cluster, group string, topics ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return c.WaitProcessed(ctx, group, topics...)
}

// WaitProcessed returns when the group's committed offsets reach the end of every
// partition of every topic, and not before; transaction markers after the last record
// do not count as unprocessed.
func TestWaitProcessed(t *testing.T) {
	c := kafkatest.Embedded(t)
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
	// Offset 2 is the commit marker: the group, at 2, has processed every record.
	commit(t, c, group, txn, map[int32]int64{0: 2})
	if err := waitBriefly(c, group, txn, plain); err != nil {
		t.Errorf("only a marker left: %v", err)
	}
	missing := c.Unique("missing")
	if err := waitBriefly(c, group, plain, missing); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing topic: %v", err)
	}
}
