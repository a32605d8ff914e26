package kread

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// TopicID returns the ID of topic (Kafka 2.8+ metadata), the zero ID when the broker
// gives none. A topic deleted and created anew under the same name gets a new ID, where
// its offsets start again at 0: a checkpoint recorded with the old ID must not be read
// as an offset of the new topic.
func TopicID(client sarama.Client, topic string) (sarama.Uuid, error) {
	broker := client.LeastLoadedBroker()
	if broker == nil {
		return sarama.Uuid{}, errors.New("no broker to ask for the topic ID")
	}
	resp, err := broker.GetMetadata(sarama.NewMetadataRequest(client.Config().Version, []string{topic}))
	if err != nil {
		return sarama.Uuid{}, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Name != topic {
			continue
		}
		if !errors.Is(t.Err, sarama.ErrNoError) {
			return sarama.Uuid{}, fmt.Errorf("metadata of %q: %w", topic, t.Err)
		}
		return t.Uuid, nil
	}
	return sarama.Uuid{}, fmt.Errorf("metadata of %q: %w", topic, sarama.ErrIncompleteResponse)
}
