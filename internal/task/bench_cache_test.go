package task_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/graph"
)

// BenchmarkWordCountCache: the counting task of the processor-API word count
// (examples/wordcount/wordcount) with its store's caching on (the example's default)
// and off (wordcount.NoCaching), on words drawn from a Zipf distribution (s = 1.1) over
// a vocabulary of 10,000, the task's caches flushed every 1,000 words as a commit
// would (about 100 ms at 10k words/s per task). outputs/word is the records the sink
// wrote per word counted.
//
//	go test -run X -bench WordCountCache ./internal/task
func BenchmarkWordCountCache(b *testing.B) {
	const vocab, commitEvery = 10_000, 1_000
	words := make([][]byte, vocab)
	for i := range words {
		words[i] = []byte("word" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)))
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, vocab-1)
	seq := make([]int, 1<<16)
	for i := range seq {
		seq[i] = int(z.Uint64())
	}
	for _, tc := range []struct {
		name string
		opts []wordcount.Option
	}{{"cached", nil}, {"uncached", []wordcount.Option{wordcount.NoCaching()}}} {
		b.Run(tc.name, func(b *testing.B) {
			topo, err := wordcount.TopologyFor("lines", "counts", tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			tk, _, c := benchTask(b, topo, 1)
			topic := tk.SourceTopics()[0]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w := words[seq[i%len(seq)]]
				if err := tk.Process(graph.RawRecord{Topic: topic, Partition: 3, Offset: int64(i), Key: w, Value: w, Timestamp: time.UnixMilli(int64(i))}); err != nil {
					b.Fatal(err)
				}
				i++
				if i%commitEvery == 0 {
					if err := tk.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := tk.Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(c.sent)/float64(i), "outputs/word")
		})
	}
}
