// Package testutil has helpers for eddy's own tests against a broker speaking the Kafka
// protocol: produce lines, read a topic back with read_committed.
package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
)

// Config is a sarama config for test clients.
func Config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_9_0_0
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

// CreateTopic creates a topic with n partitions.
func CreateTopic(t testing.TB, brokers []string, name string, n int32) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, Config())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: n, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// Record is a key and value read from or written to a topic.
type Record struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   map[string]string
}

// Produce writes records (key may be nil) and waits for their acknowledgements.
func Produce(t testing.TB, brokers []string, topic string, recs []Record) {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, Config())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic}
		if r.Key != nil {
			m.Key = sarama.ByteEncoder(r.Key)
		}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		msgs[i] = m
	}
	for len(msgs) > 0 {
		n := min(len(msgs), 1000)
		if err := p.SendMessages(msgs[:n]); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
		msgs = msgs[n:]
	}
}

// ReadAll reads every partition of topic with read_committed up to its last stable
// offset (taken when called).
func ReadAll(t testing.TB, brokers []string, topic string) []Record {
	t.Helper()
	recs, err := ReadAllErr(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadAllErr is ReadAll returning its error.
func ReadAllErr(brokers []string, topic string) ([]Record, error) {
	client, err := sarama.NewClient(brokers, Config())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []Record
	for _, p := range parts {
		start, end, err := kread.EndOffsets(client, topic, p)
		if err != nil {
			return nil, err
		}
		err = kread.ReadRange(ctx, client, topic, p, start, end, func(r kread.Record) error {
			rec := Record{Partition: p, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				rec.Headers[string(h.Key)] = string(h.Value)
			}
			out = append(out, rec)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
