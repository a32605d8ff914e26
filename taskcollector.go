package eddy

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/producer"
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
	// The input record being processed goes with the record, for an error to name it
	// (producer.RecordError, OutputRecordError).
	var origin *producer.Origin
	if md, ok := t.eng.RecordMetadata(); ok {
		origin = &producer.Origin{Topic: md.Topic, Partition: md.Partition, Offset: md.Offset}
	}
	return t.txn.producer.SendFrom(t.life, origin, topic, partition, key, value, hs, ts)
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
