//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	wordcountdsl "github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// storeName is the store of the kv topologies; its changelog is <app>-kv-changelog.
const storeName = "kv"

// buildTopology makes the topology a child runs. seen, if not nil, is told when a task's
// kv processor takes its first record.
func buildTopology(spec *childSpec, seen func(processor.TaskID)) (*topology.Topology, error) {
	switch spec.Topology {
	case "passthrough":
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.Bytes(), serde.Bytes(), spec.Input)
		topology.AddSink(b, "out", spec.Output, serde.Bytes(), serde.Bytes(), "in")
		return b.Build()
	case "wordcount": // the processor-API word count, every count forwarded (its store uncached)
		return wordcount.TopologyFor(spec.Input, spec.Output, wordcount.NoCaching())
	case "wordcount-cached": // the same with its store's caching on (the example's default)
		return wordcount.TopologyFor(spec.Input, spec.Output)
	case "wordcount-dsl": // the same word count in the stream DSL
		var opts []stream.BuilderOption
		if spec.NoCaching {
			opts = append(opts, stream.NoCaching())
		}
		return wordcountdsl.TopologyFor(spec.Input, spec.Output, opts...)
	case "win-count": // keys counted per 1-minute tumbling window, no grace, every update forwarded
		b := stream.NewBuilder(stream.NoCaching())
		counts := stream.From(b, serde.Bytes(), serde.Bytes(), []string{spec.Input}).
			GroupByKey(serde.Bytes(), serde.Bytes()).
			WindowedBy(window.Tumbling(time.Minute, 0)).Count()
		stream.ToStream(counts).To(spec.Output, window.TimeWindowedSerde(serde.Bytes(), time.Minute), serde.Nullable(serde.Int64()))
		return b.Build()
	case "count": // the word count's counting sub-topology on keyed input: a store per task
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.Bytes(), serde.Bytes(), spec.Input)
		topology.AddProcessor(b, "count", func() processor.Processor[[]byte, []byte, []byte, int64] { return &keyCounter{} }, "in")
		topology.AddKeyValueStore(b, storeName, serde.Bytes(), serde.Int64(), "count")
		topology.AddSink(b, "out", spec.Output, serde.Bytes(), serde.Int64(), "count")
		return b.Build()
	case "kv-put", "kv-get":
		put := spec.Topology == "kv-put"
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.Bytes(), serde.Bytes(), spec.Input)
		topology.AddProcessor(b, "store-writer", func() processor.Processor[[]byte, []byte, []byte, []byte] {
			return &kvProcessor{put: put, seen: seen}
		}, "in")
		topology.AddKeyValueStore(b, storeName, serde.Bytes(), serde.Bytes(), "store-writer")
		return b.Build()
	}
	return nil, fmt.Errorf("unknown topology %q", spec.Topology)
}

// kvProcessor puts every record into the store (kv-put) or only reads its key (kv-get,
// which leaves the changelog as it is).
type kvProcessor struct {
	ctx   processor.Context[[]byte, []byte]
	store statestore.KeyValueStore[[]byte, []byte]
	put   bool
	seen  func(processor.TaskID)
	first bool
}

func (p *kvProcessor) Init(ctx processor.Context[[]byte, []byte]) error {
	p.ctx = ctx
	var err error
	p.store, err = processor.KeyValueStore[[]byte, []byte](ctx, storeName)
	return err
}

func (p *kvProcessor) Process(rec processor.Record[[]byte, []byte]) error {
	if !p.first {
		p.first = true
		if p.seen != nil {
			p.seen(p.ctx.TaskID())
		}
	}
	if p.put {
		return p.store.Put(rec.Key, rec.Value)
	}
	_, _, err := p.store.Get(rec.Key)
	return err
}

func (p *kvProcessor) Close() error { return nil }

// keyCounter counts the records of each key in the store and forwards the new count,
// as the word count's counter does for words.
type keyCounter struct {
	ctx    processor.Context[[]byte, int64]
	counts statestore.KeyValueStore[[]byte, int64]
}

func (c *keyCounter) Init(ctx processor.Context[[]byte, int64]) error {
	c.ctx = ctx
	var err error
	c.counts, err = processor.KeyValueStore[[]byte, int64](ctx, storeName)
	return err
}

func (c *keyCounter) Process(rec processor.Record[[]byte, []byte]) error {
	n, _, err := c.counts.Get(rec.Key)
	if err != nil {
		return err
	}
	n++
	if err := c.counts.Put(rec.Key, n); err != nil {
		return err
	}
	return c.ctx.Forward(processor.WithValue(rec, n))
}

func (c *keyCounter) Close() error { return nil }

// repartitionTopics lists the repartition topics of the topology a child runs for an
// application: the DSL names its own (they need not be the processor-API version's
// "<app>-words-repartition"), so they are read from the topology, not spelled here.
func repartitionTopics(spec *childSpec) ([]string, error) {
	topo, err := buildTopology(spec, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, st := range topo.Subtopologies() {
		_, reps := st.InternalTopics(spec.Group)
		for _, r := range reps {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// eddyConfig is the application's configuration: eddy's defaults, the row's guarantee
// and commit interval, the tuning, and hooks that collect statistics.
func eddyConfig(spec *childSpec, reg metrics.Registry, logs *logStats, onRestore func(processor.TaskID, changelog.Result)) eddy.Config {
	g := eddy.AtLeastOnce
	if spec.ExactlyOnce {
		g = eddy.ExactlyOnce
	}
	return eddy.Config{
		ApplicationID:  spec.Group,
		Brokers:        spec.Brokers,
		StateDir:       spec.StateDir,
		Guarantee:      g,
		CommitInterval: spec.CommitInterval,
		CommitRecords:  spec.Tune.CommitRecords,
		// The rows named *-pertask run the producer-per-task model beside the default
		// producer per worker.
		ProducerPerTask:    spec.Tune.PerTask,
		OverlapCommits:     spec.Tune.Overlap,
		Workers:            spec.Tune.Workers,
		StoreWriteInterval: spec.Tune.StoreWrite,
		Logger:             slog.New(&logHandler{s: logs, next: slog.NewTextHandler(os.Stderr, nil)}),
		Sarama: func(sc *sarama.Config) {
			sc.MetricRegistry = reg
			spec.Tune.apply(sc)
		},
		OnRestore: onRestore,
	}
}

// runEddy runs an application until the parent stops it.
func runEddy(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult) error {
	var topo *topology.Topology
	var err error
	if strings.HasPrefix(spec.Topology, "pg-") || spec.Topology == "drop" {
		st := &sinkStats{}
		var closePool func()
		if topo, closePool, err = pgTopology(ctx, spec, st); err != nil {
			return err
		}
		defer closePool()
		defer st.fill(res)
	} else if topo, err = buildTopology(spec, nil); err != nil {
		return err
	}
	logs := &logStats{}
	app, err := eddy.New(topo, eddyConfig(spec, reg, logs, nil))
	if err != nil {
		return err
	}
	err = app.Run(ctx)
	logs.fill(res)
	return err
}

// runRestore runs an application until every one of spec.ExpectTasks tasks restored its
// store and processed a record, then stops it (calling snapshot first), and reports the
// restore.
func runRestore(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult, snapshot func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	var mu sync.Mutex
	restored := map[processor.TaskID]bool{}
	resumed := map[processor.TaskID]time.Time{}
	var firstStart, lastEnd time.Time
	check := func() {
		if len(restored) >= spec.ExpectTasks && len(resumed) >= spec.ExpectTasks {
			snapshot()
			cancel()
		}
	}
	onRestore := func(id processor.TaskID, r changelog.Result) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if start := now.Add(-r.Duration); firstStart.IsZero() || start.Before(firstStart) {
			firstStart = start
		}
		lastEnd = now
		res.RestoreRecords += r.Records
		if r.Wiped {
			res.Wiped++
		}
		restored[id] = true
		check()
	}
	seen := func(id processor.TaskID) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := resumed[id]; !ok {
			resumed[id] = time.Now()
		}
		check()
	}
	topo, err := buildTopology(spec, seen)
	if err != nil {
		return err
	}
	logs := &logStats{}
	app, err := eddy.New(topo, eddyConfig(spec, reg, logs, onRestore))
	if err != nil {
		return err
	}
	err = app.Run(ctx)
	logs.fill(res)
	mu.Lock()
	defer mu.Unlock()
	res.Tasks = len(restored)
	if len(restored) < spec.ExpectTasks || len(resumed) < spec.ExpectTasks {
		return errors.Join(err, fmt.Errorf("stopped with %d of %d tasks restored and %d resumed", len(restored), spec.ExpectTasks, len(resumed)))
	}
	res.RestoreSeconds = lastEnd.Sub(firstStart).Seconds()
	res.FirstRestore = firstStart.Sub(began).Seconds()
	var first, last time.Time
	for _, t := range resumed {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	res.ResumeFirst, res.ResumeAll = first.Sub(began).Seconds(), last.Sub(began).Seconds()
	return err
}

// runChangelogRead reads every partition of spec.Input from its start with a plain
// sarama consumer (read_committed) until spec.ExpectPer records of each are read.
func runChangelogRead(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult, snapshot func()) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	consumer, err := sarama.NewConsumer(spec.Brokers, saramaBase(spec, reg, spec.Group))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer consumer.Close()
	var records, bytes atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for p := range spec.Partitions {
		want := spec.ExpectPer[p]
		if want == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(spec.Input, p, sarama.OffsetOldest)
		if err != nil {
			cancel(fmt.Errorf("consume partition %d: %w", p, err))
			break
		}
		wg.Go(func() {
			defer pc.AsyncClose()
			var n, b int64
			defer func() { records.Add(n); bytes.Add(b) }()
			for n < want {
				select {
				case m := <-pc.Messages():
					n++
					b += int64(len(m.Key) + len(m.Value))
				case e := <-pc.Errors():
					cancel(fmt.Errorf("partition %d: %w", p, e))
					return
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	res.Records, res.Bytes = records.Load(), bytes.Load()
	snapshot()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// runChangelogKread reads the same with internal/kread's Fetch, as the restorer does
// (one client for all partitions, 32 MiB fetches), without writing a store.
func runChangelogKread(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult, snapshot func()) error {
	client, err := sarama.NewClient(spec.Brokers, saramaBase(spec, reg, spec.Group))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	fetch := spec.Tune.KreadFetch
	if fetch <= 0 {
		fetch = 32 << 20 // restore.Restorer's default
	}
	var records, bytes atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, spec.Partitions)
	began := time.Now()
	for p := range spec.Partitions {
		wg.Go(func() {
			start, end, err := kread.EndOffsets(client, spec.Input, p)
			if err != nil {
				errs[p] = err
				return
			}
			var n, b int64
			next, stuck := start, 0
			for next < end && ctx.Err() == nil {
				recs, after, err := kread.Fetch(client, spec.Input, p, next, end, fetch)
				if err != nil {
					errs[p] = err
					return
				}
				for _, r := range recs {
					n++
					b += int64(len(r.Key) + len(r.Value))
				}
				if after == next {
					if stuck++; stuck > 20 {
						errs[p] = fmt.Errorf("partition %d: no progress at %d", p, next)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				next = after
			}
			records.Add(n)
			bytes.Add(b)
		})
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	res.Records, res.Bytes = records.Load(), bytes.Load()
	snapshot()
	return errors.Join(errs...)
}

// logStats collects what eddy's log says about commits.
type logStats struct {
	commits    durationStats
	phases     *phaseClock // nil until the first commit
	phasesOnce sync.Once
	aborts     atomic.Int64
	taskStarts atomic.Int64
}

func (l *logStats) fill(r *childResult) {
	l.commits.fill(r)
	if l.phases != nil {
		l.phases.fill(r)
	}
	r.Aborts = int(l.aborts.Load())
	r.TaskStarts = int(l.taskStarts.Load())
}

// logHandler takes eddy's debug lines ("committed" with its duration, "task running")
// into logStats and passes info and above to next.
type logHandler struct {
	s    *logStats
	next slog.Handler
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		switch r.Message {
		case "committed":
			h.s.phasesOnce.Do(func() { h.s.phases = newPhaseClock() })
			r.Attrs(func(a slog.Attr) bool {
				switch {
				case a.Key == "took":
					h.s.commits.add(a.Value.Duration())
				case slices.Contains(eddyPhases, a.Key):
					h.s.phases.add(a.Key, a.Value.Duration())
				}
				return true
			})
		case "task running":
			h.s.taskStarts.Add(1)
		}
		return nil
	}
	if strings.HasPrefix(r.Message, "transaction failed") {
		h.s.aborts.Add(1)
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{s: h.s, next: h.next.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{s: h.s, next: h.next.WithGroup(name)}
}
