package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
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
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
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
	})
}

// A record that does not deserialize fails the read with its place and the serde's
// error; a value that does not serialize fails the produce.
func TestReadTypedBadRecord(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
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
	})
}

// A produce cut short by its context returns the context's error (and does not crash:
// closing the producer while it still sends panicked in sarama).
func TestProduceCancelled(t *testing.T) {
	c := kafkatest.Embedded(t)
	topic := c.Unique("cancelled")
	if err := c.CreateTopic(t.Context(), topic, 4, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%6)*time.Millisecond)
		msgs := make([]*sarama.ProducerMessage, 2000)
		for j := range msgs {
			msgs[j] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(j)), Value: sarama.StringEncoder("v")}
		}
		err := c.Produce(ctx, topic, msgs...)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}
