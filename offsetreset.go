package eddy

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kread"
)

// Per-source offset reset (topology.SourceNode.WithOffsetReset, Kafka Streams'
// Consumed.withOffsetResetPolicy). sarama's consumer group has one reset policy for all
// topics, eddy's earliest (Config sets Consumer.Offsets.Initial = OffsetOldest), and a
// claim of a partition without a committed offset starts at that policy's sentinel
// (sarama.OffsetOldest, the claim's InitialOffset). For a topic whose source reads from
// the latest offset, the claim's task then drops the records below the partition's end
// as it was when the claim started: that end becomes its committed offset, below which
// the inbox hands nothing to the task (the records are fetched and dropped, not processed).

// latestTopics lists the user topics whose source starts at the latest offset.
func latestTopics(g *graph.Graph) map[string]bool {
	out := map[string]bool{}
	for _, n := range g.Order {
		if n.Kind == graph.Source && !n.Internal && n.OffsetReset == graph.ResetLatest {
			for _, t := range n.Topics {
				out[t] = true
			}
		}
	}
	return out
}

// applyOffsetReset starts the claim of topic's partition at the partition's end when the
// topic's source reads from the latest offset and the partition has no committed offset
// (initial is sarama's sentinel). It runs before the claim hands its first record to
// the inbox.
func (rt *runtime) applyOffsetReset(t *taskRunner, topic string, partition int32, initial int64) {
	if initial != sarama.OffsetOldest || !rt.latest[topic] {
		return
	}
	end, err := kread.HighWaterMark(rt.client, topic, partition)
	if err != nil {
		// Reading from the earliest offset instead would process what the
		// application was told to skip: stop the task's input, fail loudly.
		rt.fail(fmt.Errorf("eddy: topic %q partition %d reads from the latest offset, and its end offset could not be read: %w", topic, partition, err))
		return
	}
	t.logger.Info("no committed offset: starting at the partition's end (offset reset latest)", "topic", topic, "partition", partition, "offset", end)
	t.committed.advance(topic, end)
}
