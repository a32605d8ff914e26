package eddy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
)

// TestEmitterWritesWhereKafkaPartitions (kfake and Kafka): an Emitter's keyed records
// land on the partition of Kafka's default partitioner (murmur2 of the serialized key),
// with the serdes' bytes, each once; a missing topic is ErrMissingTopic; a context that
// has ended ends Emit. Kills the mutants "sarama's hash partitioner" (FNV: other
// partitions) and "round-robin for keyed records".
func TestEmitterWritesWhereKafkaPartitions(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		topic := c.Unique("emitted")
		if err := c.CreateTopic(ctx, topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		cfg := Config{ApplicationID: c.Unique("emitter"), Brokers: c.Addrs()}
		if _, err := NewEmitter(cfg, c.Unique("missing"), serde.String(), serde.Int64()); !errors.Is(err, ErrMissingTopic) {
			t.Fatalf("an emitter to a missing topic: %v, want ErrMissingTopic", err)
		}
		em, err := NewEmitter(cfg, topic, serde.String(), serde.Int64())
		if err != nil {
			t.Fatal(err)
		}
		defer em.Close()
		const n = 40
		for i := range n {
			if err := em.Emit(ctx, fmt.Sprintf("key-%d", i), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		done, stop := context.WithCancel(ctx)
		stop()
		if err := em.Emit(done, "late", 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Emit with an ended context: %v", err)
		}
		msgs, err := c.ReadCommitted(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range msgs {
			k := string(m.Key)
			if k == "late" {
				continue // it may have been written
			}
			if want := partition.ForKey(m.Key, 4); m.Partition != want {
				t.Errorf("%s on partition %d, want %d (murmur2)", k, m.Partition, want)
			}
			v, err := serde.Int64().Deserialize(topic, m.Value)
			if err != nil || fmt.Sprintf("key-%d", v) != k || seen[k] {
				t.Errorf("record %s=%v (%v), seen before: %v", k, m.Value, err, seen[k])
			}
			seen[k] = true
		}
		if len(seen) != n {
			t.Fatalf("%d of %d records read back", len(seen), n)
		}
	})
}
