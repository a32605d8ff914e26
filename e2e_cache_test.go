package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// The DSL word count with record caching, every third commit failing after the caches
// flushed into its transaction: the aborted transaction takes the flushed counts with
// it, the replay makes them again, and the committed output is each word's counts in
// increasing order, ending at its total — fewer records than words, as the caches hold
// back all but the last count of a word per commit.
func TestCachedTablesFlushIntoTheTransaction(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		b := stream.NewBuilder()
		lines := stream.From(b, serde.String(), serde.String(), []string{e.input})
		words := stream.FlatMapValues(lines, func(_, line string) []string { return wordcount.Words(line) })
		counts := stream.GroupBy(words, func(_, w string) string { return w }, serde.String(), serde.String()).Count()
		stream.ToStream(counts).To(e.output, serde.String(), serde.Nullable(serde.Int64()))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := e.config(t)
		cfg.CommitInterval = 200 * time.Millisecond
		app, err := eddy.New(topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		commits, failures := 0, 0
		eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
			mu.Lock()
			defer mu.Unlock()
			commits++
			if commits%3 == 0 {
				failures++
				return errors.New("injected commit failure")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		for range 5 {
			e.produce(t, 100)
			time.Sleep(150 * time.Millisecond)
		}
		e.waitCounts(t, time.Minute, "the counts")
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		t.Logf("commits %d, injected failures %d", commits, failures)
		if failures == 0 {
			t.Fatal("no commit failed: the test injected nothing")
		}
		mu.Unlock()
		total, outputs := int64(0), 0
		for w, seq := range e.readOutput(t) {
			total += e.want[w]
			outputs += len(seq)
			for i := 1; i < len(seq); i++ {
				if seq[i] <= seq[i-1] {
					t.Errorf("word %q: counts %v are not increasing: a count was repeated or lost", w, seq)
					break
				}
			}
			if n := len(seq); n == 0 || seq[n-1] != e.want[w] {
				t.Errorf("word %q: counts %v, want them to end at %d", w, seq, e.want[w])
			}
		}
		t.Logf("%d words, %d output records", total, outputs)
		if int64(outputs) >= total {
			t.Errorf("%d output records for %d words: the caches deduplicated nothing", outputs, total)
		}
		if err := e.c.WaitStable(ctxT(t), e.output); err != nil {
			t.Fatalf("hanging transaction on the output: %v", err)
		}
	})
}

// What record caching saves on the DSL word count: the output records per input word
// with caching (Kafka Streams' default; here 100 ms commits, 2 partitions) and without
// (one output record per word). The input is a backlog of lines of Zipf-distributed words
// from a vocabulary of 5000, read as fast as the embedded broker serves it.
func TestCachingSavesWordCountOutput(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		rng := rand.New(rand.NewPCG(1, 2))
		zipf := rand.NewZipf(rng, 1.1, 1, 4999)
		// 1500 lines (15,000 words), for CI time: 3000 gave 0.26 cached output records
		// per word (load 25 on 2 cores) and 1500 give 0.21-0.30 (load 35-70), both far
		// under the bound; the uncached mode's one record per word holds at any size.
		lines := make([]string, 1500)
		for i := range lines {
			ws := make([]string, 10)
			for j := range ws {
				ws[j] = fmt.Sprintf("w%d", zipf.Uint64())
			}
			lines[i] = strings.Join(ws, " ")
		}
		perWord := map[string]float64{}
		for _, mode := range []string{"cached", "uncached"} {
			var opts []stream.BuilderOption
			if mode == "uncached" {
				opts = append(opts, stream.NoCaching())
			}
			words, outputs, took := runDSLWordCount(t, c, lines, opts...)
			perWord[mode] = float64(outputs) / float64(words)
			t.Logf("%s: %d words, %d output records (%.4f per word) in %v", mode, words, outputs, perWord[mode], took.Round(time.Millisecond))
		}
		if perWord["uncached"] != 1 {
			t.Errorf("without caching: %.4f output records per word, want 1", perWord["uncached"])
		}
		// 0.21-0.30 here; the bound leaves room for a slow machine, where each 100 ms
		// commit holds fewer words (and so fewer repeats of a word).
		if perWord["cached"] >= 0.9 {
			t.Errorf("with caching: %.4f output records per word, want well under 1", perWord["cached"])
		}
	})
}

// runDSLWordCount counts the words of lines with the DSL word count (100 ms commits) and
// returns the number of words and of output records once every count is final.
func runDSLWordCount(t *testing.T, c *kafkatest.Cluster, lines []string, opts ...stream.BuilderOption) (words, outputs int, took time.Duration) {
	t.Helper()
	e := newWordCount(t, c, 2)
	b := stream.NewBuilder(opts...)
	in := stream.From(b, serde.String(), serde.String(), []string{e.input})
	ws := stream.FlatMapValues(in, func(_, line string) []string { return wordcount.Words(line) })
	counts := stream.GroupBy(ws, func(_, w string) string { return w }, serde.String(), serde.String()).Count()
	stream.ToStream(counts).To(e.output, serde.String(), serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*sarama.ProducerMessage, len(lines))
	for i, l := range lines {
		for _, w := range wordcount.Words(l) {
			e.want[w]++
			words++
		}
		msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(l)}
	}
	if err := c.Produce(ctxT(t), e.input, msgs...); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.CommitInterval = 100 * time.Millisecond
	began := time.Now()
	inst := start(t, topo, cfg)
	e.waitCountsWhileRunning(t, inst, 2*time.Minute, "the counts")
	took = time.Since(began)
	if err := inst.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, seq := range e.readOutput(t) {
		outputs += len(seq)
	}
	return words, outputs, took
}

// The record caches' metrics: every count update of the word count is a hit (merged
// into its word's pending update) or a miss, so hits + misses is the word count; with a
// small byte budget some flushes are evictions; commits flush too.
func TestRecordCacheMetrics(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		b := stream.NewBuilder(stream.CacheMaxBytes(1000))
		lines := stream.From(b, serde.String(), serde.String(), []string{e.input})
		words := stream.FlatMapValues(lines, func(_, line string) []string { return wordcount.Words(line) })
		counts := stream.GroupBy(words, func(_, w string) string { return w }, serde.String(), serde.String()).Count(stream.Materialized("counts"))
		stream.ToStream(counts).To(e.output, serde.String(), serde.Nullable(serde.Int64()))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		cfg := e.config(t)
		cfg.Metrics = reg
		e.produce(t, 300)
		in := start(t, topo, cfg)
		e.waitCounts(t, time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		sums := map[string]float64{}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "eddy_record_cache_") {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "store" && l.GetValue() != "counts" {
						t.Errorf("%s has store label %q", f.GetName(), l.GetValue())
					}
				}
				sums[f.GetName()] += m.GetCounter().GetValue()
			}
		}
		var nWords float64
		for _, n := range e.want {
			nWords += float64(n)
		}
		t.Logf("words %v, cache metrics %v", nWords, sums)
		if got := sums["eddy_record_cache_hits_total"] + sums["eddy_record_cache_misses_total"]; got != nWords {
			t.Errorf("hits + misses = %v, want one per word: %v", got, nWords)
		}
		for _, name := range []string{"eddy_record_cache_hits_total", "eddy_record_cache_evictions_total", "eddy_record_cache_flushes_total"} {
			if sums[name] == 0 {
				t.Errorf("%s is 0", name)
			}
		}
	})
}
