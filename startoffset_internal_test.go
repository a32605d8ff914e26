package eddy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// A worker commits where a partition starts when none of its tasks has an offset to
// commit (worker.fenceOffset). The start follows the topic's reset policy: committing
// the end of a topic read from the earliest offset would skip its records not yet
// processed (the task's committed offset moves there too), committing the log start of
// one read from the latest would process, after a restart, what it was told to skip.
func TestStartOffsetFollowsTheResetPolicy(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		earliest, latest := c.Unique("earliest"), c.Unique("latest")
		for _, topic := range []string{earliest, latest} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if err := c.ProduceToPartition(ctx, topic, 0, &sarama.ProducerMessage{Value: sarama.StringEncoder("v")}); err != nil {
					t.Fatal(err)
				}
			}
		}
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		rt := &runtime{logger: slog.New(slog.DiscardHandler), client: client, restoreC: client, latest: map[string]bool{latest: true}}
		for topic, want := range map[string]int64{earliest: 0, latest: 5} {
			got, err := rt.startOffset(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("start offset of %s/0: %d, want %d", topic, got, want)
			}
		}
	})
}
