//go:build linux

package main

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// The word-count latency reader counts a word once however many counts of it it reads
// (a cache forwards some, not all), leaves the probe word out of the words and the
// latencies, and refuses a value that is not a count.
func TestWordLatencyReaderCountsWords(t *testing.T) {
	lr := &latencyReader{}
	lr.countWords()
	now := time.Now()
	count := func(word string, n uint64, age time.Duration) *sarama.ConsumerMessage {
		return &sarama.ConsumerMessage{Topic: "out", Key: []byte(word), Value: binary.BigEndian.AppendUint64(nil, n), Timestamp: now.Add(-age)}
	}
	for _, m := range []*sarama.ConsumerMessage{
		count(probeWord, 1, time.Second), count(probeWord, 2, time.Second),
		count("alpha", 1, 30*time.Millisecond), count("alpha", 3, 20*time.Millisecond), // the cache merged alpha's second
		count("beta", 2, 10*time.Millisecond),
		count("alpha", 2, 5*time.Millisecond), // an older count read late does not count again
	} {
		lr.read(m, now)
	}
	probes, words, err := lr.progress()
	if probes != 2 || words != 5 || err != nil {
		t.Errorf("progress: %d probes, %d words, %v; want 2 probes, 5 words (alpha 3, beta 2), no error", probes, words, err)
	}
	if lat := lr.latencies(); len(lat) != 4 || lat[0] != 30 || lat[3] != 5 {
		t.Errorf("latencies %v ms, want the four counts of alpha and beta: 30, 20, 10, 5", lat)
	}
	lr.read(&sarama.ConsumerMessage{Topic: "out", Partition: 3, Offset: 7, Key: []byte("gamma"), Value: []byte("12")}, now)
	if _, _, err := lr.progress(); err == nil || !strings.Contains(err.Error(), "out/3@7") {
		t.Errorf("a 2-byte count: %v, want an error naming out/3@7", err)
	}
}

// The word source's lines carry the words they say, round robin over the partitions.
func TestWordSourceLines(t *testing.T) {
	e := testEnv(t)
	e.latencyRate, e.o.latDuration, e.o.vocab, e.o.valueSize = 50, time.Second, 100, 60
	src := e.wordSource(4)
	if _, v := src.probe(2); string(v) != probeWord {
		t.Errorf("probe %q, want %q", v, probeWord)
	}
	for i := range 200 {
		key, line, p, n := src.next(i)
		if key != nil || p != int32(i%4) || n != len(strings.Fields(string(line))) || n == 0 || len(line) > 60 {
			t.Fatalf("line %d: key %q, partition %d, %d words said for %q", i, key, p, n, line)
		}
	}
}

// A latency row with a p99 target is judged on its p99 against its ceiling's.
func TestLatencyP99Target(t *testing.T) {
	e := testEnv(t)
	e.o.rows = []string{"lat-ks-wc-dsl-eos-100ms", "lat-wc-dsl-eos-100ms", "lat-wc-cached-eos-100ms"}
	for round, p99s := range [][3]float64{{1000, 500, 700}, {800, 400, 600}} {
		e.results = append(e.results,
			&runResult{Row: "lat-ks-wc-dsl-eos-100ms", Round: round, P50: 100, P99: p99s[0], Max: 2000},
			&runResult{Row: "lat-wc-dsl-eos-100ms", Round: round, P50: 50, P99: p99s[1], Max: 900},
			&runResult{Row: "lat-wc-cached-eos-100ms", Round: round, P50: 50, P99: p99s[2], Max: 900})
	}
	verdicts := map[string]string{}
	for _, s := range e.summarize() {
		verdicts[s.Row] = s.Verdict
	}
	// p99 ratios: 0.5 in both rounds (met); 0.70 and 0.75 (missed).
	if verdicts["lat-wc-dsl-eos-100ms"] != "met" || verdicts["lat-wc-cached-eos-100ms"] != "MISSED" || verdicts["lat-ks-wc-dsl-eos-100ms"] != "" {
		t.Errorf("verdicts %v, want the DSL's met, the cached processor API's MISSED, none for Kafka Streams", verdicts)
	}
}

// testEnv is an env with options and a seeded random source, no broker.
func testEnv(t *testing.T) *env {
	t.Helper()
	return &env{o: &options{}, rng: rand.New(rand.NewPCG(1, 2))}
}
