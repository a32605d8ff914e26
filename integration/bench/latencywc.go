//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// probeWord is the word of a word-count latency row's probe lines: 15 letters, so no
// word of the vocabulary (3 to 10 letters) is it.
const probeWord = "probeprobeprobe"

// latencyWordCountRow runs a word count (eddy's topology topo, or Kafka Streams' for a
// row named lat-ks-*) at -latency-rate lines per second, each line stamped with the
// time it is produced, exactly-once with 100 ms commits, and reads its counts with
// read_committed. A count carries the timestamp of the last line that changed it (both
// engines, with their record caches too), so its latency is the time from that line's
// production to the count's visibility: what a reader of the counts waits for the
// freshest update. The run ends when the counts add up to every word written.
func latencyWordCountRow(topo string) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		kind := "eddy"
		if strings.HasPrefix(r.name, "lat-ks-") {
			kind = "kstreams"
			if _, err := e.needKStreams(ctx); err != nil {
				return nil, err
			}
		}
		P := int32(e.o.partitions)
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		spec := childSpec{
			Row: r.name, Input: id + "-in", Output: id + "-out", Group: id, Partitions: P,
			CommitInterval: 100 * time.Millisecond, Topology: topo, ExactlyOnce: true,
			StateDir: e.stateDir(id), KSCache: r.ksDefaults,
		}
		return e.runLatency(ctx, kind, fmt.Sprintf("%s-r%d", r.name, round), spec, true, e.wordSource(P))
	}
}

// wordSource is a word count's input: lines of at most -value-size bytes of words drawn
// from -vocab words, round robin over the partitions, enough for -latency-duration at the
// rate (then again from the first); a probe is a line of the probe word.
func (e *env) wordSource(P int32) latencySource {
	n := int(e.o.latDuration.Seconds()*float64(e.latencyRate)) + e.latencyRate
	recs, _, _ := lines(e.rng, vocabulary(e.rng, e.o.vocab), 14*n, e.o.valueSize, P)
	return latencySource{
		probe: func(int32) ([]byte, []byte) { return nil, []byte(probeWord) },
		next: func(i int) ([]byte, []byte, int32, int) {
			line := recs[i%len(recs)].value
			return nil, line, int32(i) % P, strings.Count(string(line), " ") + 1
		},
	}
}

// countWords makes the reader read a word count's output: each record a word and its
// count (8 bytes, big-endian: both engines' Long serde).
func (lr *latencyReader) countWords() {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.counts = map[string]int64{}
}

// readCount takes a count read at now; lr.mu is held.
func (lr *latencyReader) readCount(m *sarama.ConsumerMessage, now time.Time) {
	if len(m.Value) != 8 {
		lr.errs = append(lr.errs, fmt.Errorf("word count output %s/%d@%d: value of %d bytes, want a count of 8", m.Topic, m.Partition, m.Offset, len(m.Value)))
		return
	}
	word, n := string(m.Key), int64(binary.BigEndian.Uint64(m.Value))
	if old := lr.counts[word]; n > old {
		lr.counts[word] = n
		if word != probeWord {
			lr.counted += n - old
		}
	}
	if word != probeWord {
		lr.lat = append(lr.lat, float64(now.Sub(m.Timestamp))/float64(time.Millisecond))
	}
}
