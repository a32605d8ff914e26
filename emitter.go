package eddy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/serde"
)

// Emitter writes typed records to one topic from the same service as an App, with
// eddy's serdes and Kafka's default partitioner (murmur2 of the serialized key, as the
// Java producer and eddy's sinks), so that a keyed record lands on the partition an
// eddy or Kafka Streams application expects (goka's Emitter). Its producer is
// idempotent (acks=all, one request in flight): a retry does not write a record twice.
// A record with a nil key (the serde's bytes are nil) goes round-robin. Safe for
// concurrent use. Without it a service had to borrow the kafkatest package or write
// sarama code (issue 26).
type Emitter[K, V any] struct {
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
	client sarama.Client
	prod   sarama.SyncProducer

	mu    sync.Mutex
	parts int32 // the topic's partition count, read once
	next  atomic.Uint32
}

// NewEmitter connects an Emitter to cfg's brokers with cfg's security and Sarama
// settings (ApplicationID is the client ID; the commit and store settings are not
// used) and checks that topic exists.
func NewEmitter[K, V any](cfg Config, topic string, keys serde.Serde[K], values serde.Serde[V]) (*Emitter[K, V], error) {
	if keys == nil || values == nil {
		return nil, configErr("NewEmitter", "topic %q: a nil key or value serde", topic)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sc, _, err := cfg.saramaConfig()
	if err != nil {
		return nil, err
	}
	sc.Producer.Idempotent = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Return.Successes = true
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	if sc.Producer.Retry.Max < 10 {
		sc.Producer.Retry.Max = 10
	}
	client, err := sarama.NewClient(cfg.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("eddy: emitter to %q: connect: %w", topic, cfg.explainRefusal(err))
	}
	e := &Emitter[K, V]{topic: topic, keys: keys, values: values, client: client}
	if _, err := e.partitions(); err != nil {
		_ = client.Close()
		return nil, err
	}
	if e.prod, err = sarama.NewSyncProducerFromClient(client); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("eddy: emitter to %q: %w", topic, err)
	}
	return e, nil
}

func (e *Emitter[K, V]) partitions() (int32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.parts > 0 {
		return e.parts, nil
	}
	ps, err := e.client.Partitions(e.topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return 0, fmt.Errorf("%w: %q (the emitter's topic); eddy does not create user topics", ErrMissingTopic, e.topic)
	}
	if err != nil {
		return 0, fmt.Errorf("eddy: emitter to %q: partitions: %w", e.topic, err)
	}
	e.parts = int32(len(ps))
	return e.parts, nil
}

// Emit writes one record and waits for the brokers' acknowledgement, or for ctx to
// end: the record may then still be written. A ctx that has already ended writes
// nothing.
func (e *Emitter[K, V]) Emit(ctx context.Context, key K, value V) error {
	// Checked first: sent anyway, a fast broker's acknowledgement and the ended ctx
	// were both ready at the select below, which picks one at random (a fresh-clone CI
	// run here returned nil for an ended ctx, TestEmitterWritesWhereKafkaPartitions).
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("eddy: emitter to %s: %w (nothing written)", e.topic, err)
	}
	kb, err := e.keys.Serialize(e.topic, key)
	if err != nil {
		return fmt.Errorf("eddy: emitter to %q: serialize the key: %w", e.topic, err)
	}
	vb, err := e.values.Serialize(e.topic, value)
	if err != nil {
		return fmt.Errorf("eddy: emitter to %q: serialize the value: %w", e.topic, err)
	}
	n, err := e.partitions()
	if err != nil {
		return err
	}
	p := int32(e.next.Add(1) % uint32(n))
	msg := &sarama.ProducerMessage{Topic: e.topic}
	if kb != nil {
		p = partition.ForKey(kb, n)
		msg.Key = sarama.ByteEncoder(kb)
	}
	if vb != nil {
		msg.Value = sarama.ByteEncoder(vb)
	}
	msg.Partition = p
	done := make(chan error, 1)
	go func() {
		_, _, err := e.prod.SendMessage(msg)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("eddy: emitter to %s/%d: %w", e.topic, p, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("eddy: emitter to %s/%d: %w (the record may still be written)", e.topic, p, ctx.Err())
	}
}

// Close waits for the records being sent and closes the connections.
func (e *Emitter[K, V]) Close() error {
	err := e.prod.Close()
	return errors.Join(err, e.client.Close())
}
