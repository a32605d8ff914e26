package kafkatest

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

// Record is a typed record read from a topic, with where it was read.
type Record[K, V any] struct {
	processor.Record[K, V]
	Partition int32
	Offset    int64
}

// ProduceTyped serializes records with eddy's serdes and writes them to topic as
// [Cluster.Produce] does: a record whose key serializes to nil bytes goes to any
// partition, a keyed one to the partition Kafka's Java producer would choose. A zero
// Timestamp leaves the timestamp to the producer (the time of sending).
func ProduceTyped[K, V any](ctx context.Context, c *Cluster, topic string, keys serde.Serde[K], values serde.Serde[V], records ...processor.Record[K, V]) error {
	msgs := make([]*sarama.ProducerMessage, 0, len(records))
	for i, r := range records {
		k, err := keys.Serialize(topic, r.Key)
		if err != nil {
			return fmt.Errorf("kafkatest: produce to %q: record %d: key: %w", topic, i, err)
		}
		v, err := values.Serialize(topic, r.Value)
		if err != nil {
			return fmt.Errorf("kafkatest: produce to %q: record %d: value: %w", topic, i, err)
		}
		m := &sarama.ProducerMessage{Timestamp: r.Timestamp}
		// Null key or tombstone: no Encoder.
		if k != nil {
			m.Key = sarama.ByteEncoder(k)
		}
		if v != nil {
			m.Value = sarama.ByteEncoder(v)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs = append(msgs, m)
	}
	return c.Produce(ctx, topic, msgs...)
}

// ReadCommittedTyped is [Cluster.ReadCommitted] deserialized with eddy's serdes: every
// committed record of topic up to the last stable offset, ordered by partition, then
// offset. A record that does not deserialize fails the call with an error naming its
// partition and offset.
func ReadCommittedTyped[K, V any](ctx context.Context, c *Cluster, topic string, keys serde.Serde[K], values serde.Serde[V]) ([]Record[K, V], error) {
	msgs, err := c.ReadCommitted(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]Record[K, V], 0, len(msgs))
	for _, m := range msgs {
		k, err := keys.Deserialize(topic, m.Key)
		if err != nil {
			return nil, fmt.Errorf("kafkatest: read %q: partition %d offset %d: key: %w", topic, m.Partition, m.Offset, err)
		}
		v, err := values.Deserialize(topic, m.Value)
		if err != nil {
			return nil, fmt.Errorf("kafkatest: read %q: partition %d offset %d: value: %w", topic, m.Partition, m.Offset, err)
		}
		r := Record[K, V]{Partition: m.Partition, Offset: m.Offset}
		r.Key, r.Value, r.Timestamp = k, v, m.Timestamp
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, processor.Header{Key: string(h.Key), Value: h.Value})
		}
		out = append(out, r)
	}
	return out, nil
}
