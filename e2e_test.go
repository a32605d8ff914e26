package eddy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/testutil"
)

func startKfake(t *testing.T) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("EDDY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func TestWordCountEndToEnd(t *testing.T) {
	brokers := startKfake(t)
	testutil.CreateTopic(t, brokers, wordcount.InputTopic, 4)
	testutil.CreateTopic(t, brokers, wordcount.OutputTopic, 4)
	want := map[string]int64{}
	var recs []testutil.Record
	for i := 0; i < 500; i++ {
		line := fmt.Sprintf("The quick brown fox %d jumps over the lazy dog %d", i%7, i%13)
		for _, w := range wordcount.Words(line) {
			want[w]++
		}
		recs = append(recs, testutil.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(line)})
	}
	testutil.Produce(t, brokers, wordcount.InputTopic, recs)

	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: "wc", Brokers: brokers, StateDir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()

	deadline := time.Now().Add(60 * time.Second)
	var got map[string]int64
	for time.Now().Before(deadline) {
		got = map[string]int64{}
		for _, r := range testutil.ReadAll(t, brokers, wordcount.OutputTopic) {
			got[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		}
		if equalCounts(got, want) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("app stopped early: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !equalCounts(got, want) {
		t.Fatalf("counts differ:\n got %v\nwant %v", got, want)
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

var _ = strings.ToLower
