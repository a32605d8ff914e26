package eddy

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
)

// recordBufferKeys publishes the dirty keys per store for the metrics.
func (t *taskRunner) recordBufferKeys() {
	if !t.metrics.Exported() {
		return
	}
	levels := make(map[string]int, len(t.set.Names()))
	for _, name := range t.set.Names() {
		levels[name] = t.set.Buffer(name).Dirty()
	}
	t.bufferKeys.Store(&levels)
}

// Send implements task.Collector: sink and dead-letter records go to the producer.
func (t *taskRunner) Send(topic string, partition int32, key, value []byte, headers []processor.Header, ts time.Time) error {
	var hs []sarama.RecordHeader
	if len(headers) > 0 {
		hs = make([]sarama.RecordHeader, len(headers))
		for i, h := range headers {
			hs[i] = sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value}
		}
	}
	md, ok := t.eng.RecordMetadata()
	if ok {
		if oe := t.refusal(md, topic, partition); oe != nil {
			return oe // refused by the broker in an earlier attempt: the policy's
		}
	}
	// A record larger than its topic's max.message.bytes is refused however often it
	// is sent: found here, before it is sent, it is Config.OnOutputError's to handle
	// (the task engine applies it), and the records ahead of it in the transaction go
	// on. Sent, it would fail the whole transaction (producer.Permanent).
	limit := t.outputLimit(topic)
	if limit > 0 {
		if size := producer.RecordBatchSize(key, value, hs); size > limit {
			oe := &task.OutputError{Topic: topic, Partition: partition, Size: size, Limit: limit}
			if ok {
				oe.Input = &md
			}
			return oe
		}
	}
	// The input record being processed goes with the record, for an error to name it
	// (producer.RecordError, OutputRecordError).
	var origin *producer.Origin
	if ok {
		origin = &producer.Origin{Topic: md.Topic, Partition: md.Partition, Offset: md.Offset}
	}
	// Within the limit, the producer keeps the batches it makes for the topic within it
	// too (SendWithin).
	if t.isolated(topic, partition) {
		limit = 1 // one record per batch: a refusal names its record
	}
	return t.txn.sendOutput(t.life, limit, origin, topic, partition, key, value, hs, ts)
}

// outputLimit is the max.message.bytes of an output topic, 0 when eddy does not check
// it: with compression the broker measures the compressed batch, which only the
// producer knows.
func (t *taskRunner) outputLimit(topic string) int {
	if t.cfg.producer.Sarama != nil && t.cfg.producer.Sarama.Producer.Compression != sarama.CompressionNone {
		return 0
	}
	n, ok := t.outLimits[topic]
	if !ok {
		n = t.host.outputLimit(topic)
		if t.outLimits == nil {
			t.outLimits = map[string]int{}
		}
		t.outLimits[topic] = n
	}
	return n
}

// Partitions implements task.Collector.
// The counts are cached per task: the engine asks for every record it partitions.
func (t *taskRunner) Partitions(topic string) (int32, error) {
	if n, ok := t.partCounts[topic]; ok {
		return n, nil
	}
	n, err := t.host.partitionCount(topic)
	if err != nil {
		return 0, err
	}
	if t.partCounts == nil {
		t.partCounts = map[string]int32{}
	}
	t.partCounts[topic] = n
	return n, nil
}

func toRaw(m *sarama.ConsumerMessage) graph.RawRecord {
	var hs []processor.Header
	if len(m.Headers) > 0 {
		hs = make([]processor.Header, 0, len(m.Headers))
		for _, h := range m.Headers {
			if h != nil {
				hs = append(hs, processor.Header{Key: string(h.Key), Value: h.Value})
			}
		}
	}
	return graph.RawRecord{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Headers: hs, Timestamp: m.Timestamp}
}
