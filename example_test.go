package eddy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// Run the word count on an embedded broker and read its committed output.
func Example() {
	ctx := context.Background()
	broker, err := kafkatest.NewBroker(kafkatest.SeedTopics(2, wordcount.InputTopic, wordcount.OutputTopic))
	if err != nil {
		panic(err)
	}
	defer broker.Close()
	c := broker.Cluster()
	_ = c.Produce(ctx, wordcount.InputTopic,
		&sarama.ProducerMessage{Value: sarama.StringEncoder("all streams lead to kafka")},
		&sarama.ProducerMessage{Value: sarama.StringEncoder("hello kafka streams")})

	topo, err := wordcount.Topology()
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "eddy-example")
	defer os.RemoveAll(dir)
	app, err := eddy.New(topo, eddy.Config{
		ApplicationID: "wordcount-example",
		Brokers:       broker.Addrs(),
		StateDir:      dir,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()

	// Wait until the committed output counts all 8 words.
	counts := map[string]int64{}
	total := func() (n int64) {
		for _, c := range counts {
			n += c
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); total() < 8 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		msgs, _ := c.ReadCommitted(ctx, wordcount.OutputTopic)
		for _, m := range msgs {
			counts[string(m.Key)] = int64(binary.BigEndian.Uint64(m.Value))
		}
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		fmt.Println(w, counts[w])
	}
	// Output:
	// all 1
	// hello 1
	// kafka 2
	// lead 1
	// streams 2
	// to 1
}
