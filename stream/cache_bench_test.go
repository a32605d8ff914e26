package stream_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// BenchmarkWordCountCaching runs the DSL word count in topologytest, committing every
// 1000 lines, with and without record caching, on lines of 10 Zipf-distributed words
// of a vocabulary of 5000: ns per line, and output records per input word.
func BenchmarkWordCountCaching(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, 4999)
	lines := make([][]byte, 10000)
	for i := range lines {
		ws := make([]string, 10)
		for j := range ws {
			ws[j] = fmt.Sprintf("w%d", zipf.Uint64())
		}
		lines[i] = []byte(strings.Join(ws, " "))
	}
	for _, mode := range []string{"cached", "uncached"} {
		b.Run(mode, func(b *testing.B) {
			var opts []stream.BuilderOption
			if mode == "uncached" {
				opts = append(opts, stream.NoCaching())
			}
			sb := stream.NewBuilder(opts...)
			ws := stream.FlatMapValues(stream.From(sb, str, str, []string{"lines"}), func(_, l string) []string { return strings.Fields(l) })
			counts := stream.GroupBy(ws, func(_, w string) string { return w }, str, str).Count()
			stream.ToStream(counts).To("counts", str, ni64)
			topo, err := sb.Build()
			if err != nil {
				b.Fatal(err)
			}
			d, err := topologytest.New(topo, topologytest.Config{CommitEvery: 1000})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			b.ResetTimer()
			for i := range b.N {
				if err := d.PipeRaw("lines", nil, lines[i%len(lines)], nil, at(int64(i))); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Commit(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(len(d.Records("counts")))/float64(10*b.N), "outputs/word")
		})
	}
}
