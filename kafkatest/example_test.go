package kafkatest_test

import (
	"context"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

// An embedded broker, outside a test: create a topic, produce, and read
// back what a read_committed consumer sees.
func ExampleNewBroker() {
	b, err := kafkatest.NewBroker()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := b.Cluster()
	if err := c.CreateTopic(ctx, "words", 2, nil); err != nil {
		log.Fatal(err)
	}
	err = c.ProduceToPartition(ctx, "words", 0,
		&sarama.ProducerMessage{Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder("hello")},
		&sarama.ProducerMessage{Key: sarama.StringEncoder("b"), Value: sarama.StringEncoder("world")},
	)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := c.ReadCommitted(ctx, "words")
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%d/%d %s=%s\n", m.Partition, m.Offset, m.Key, m.Value)
	}
	// Output:
	// 0/0 a=hello
	// 0/1 b=world
}

// A test that runs against the embedded broker and, when EDDY_TEST_BROKERS
// is set, against a real Kafka too. Topic and group names come from Unique:
// a real cluster keeps them across tests and runs.
func ExampleForEachCluster() {
	_ = func(t *testing.T) { // func TestPipeline(t *testing.T)
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
			t.Parallel()
			ctx := t.Context()
			in, out := c.Unique("input"), c.Unique("output")
			for _, topic := range []string{in, out} {
				if err := c.CreateTopic(ctx, topic, 4, nil); err != nil {
					t.Fatal(err)
				}
			}
			// ... run the application on c.Addrs() with application ID
			// c.Unique("app"), then:
			if err := c.WaitStable(ctx, out); err != nil {
				t.Fatal(err)
			}
			got, err := c.ReadCommitted(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			_ = got // compare with the expected output
		})
	}
}

// Typed records in and out, with eddy's serdes.
func ExampleProduceTyped() {
	b, err := kafkatest.NewBroker()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := b.Cluster()
	if err := c.CreateTopic(ctx, "prices", 1, nil); err != nil {
		log.Fatal(err)
	}
	err = kafkatest.ProduceTyped(ctx, c, "prices", serde.String(), serde.Int64(),
		processor.Record[string, int64]{Key: "apple", Value: 120},
		processor.Record[string, int64]{Key: "bread", Value: 250})
	if err != nil {
		log.Fatal(err)
	}
	recs, err := kafkatest.ReadCommittedTyped(ctx, c, "prices", serde.String(), serde.Int64())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("%d/%d %s=%d\n", r.Partition, r.Offset, r.Key, r.Value)
	}
	// Output:
	// 0/0 apple=120
	// 0/1 bread=250
}
