//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
)

// childSpec tells a child process what to run. The parent passes it as JSON.
type childSpec struct {
	Row            string
	Brokers        []string
	Input          string
	Output         string
	Group          string // consumer group, application ID, transactional ID prefix
	Partitions     int32
	CommitInterval time.Duration
	SingleProducer bool    // pipe-txn: one transactional producer for every partition
	Topology       string  // passthrough, wordcount, wordcount-dsl, win-count, count, kv-put, kv-get (Kafka Streams: count, wordcount, win-count)
	NoCaching      bool    // wordcount-dsl: record caching off (stream.NoCaching)
	SampleCost     bool    // sample open sockets and goroutines (cost-per-task rows)
	Status         bool    // print status lines (scale rows: scale.go)
	Threads        int     // Kafka Streams: stream threads (default 1)
	KSCache        bool    // Kafka Streams: its record cache at its default size (statestore.cache.max.bytes unset) instead of off
	ExactlyOnce    bool    // eddy: the guarantee
	StateDir       string  // eddy
	ExpectTasks    int     // restore: stop once this many tasks restored and processed a record
	ExpectPer      []int64 // changelog reads: data records per partition
	Tune           tuning  // sarama (and eddy) settings
	ProfilePrefix  string  // write <prefix>.{cpu,allocs,mutex}.pprof
	Postgres       string  // postgres rows: the server's DSN
	Table          string  // postgres rows: the table
	PGBatch        int     // postgres rows: rows per statement (0: pgsink's default)
}

// childResult is what a child reports on stdout (one line, resultPrefix + JSON). The
// parent adds the CPU time and peak RSS from the child's rusage.
type childResult struct {
	Err string `json:",omitempty"`

	// Self-measured rates (changelog reads and restores).
	Records int64   `json:",omitempty"`
	Bytes   int64   `json:",omitempty"`
	Seconds float64 `json:",omitempty"`

	// Restores.
	Tasks          int     `json:",omitempty"`
	RestoreRecords int64   `json:",omitempty"`
	RestoreSeconds float64 `json:",omitempty"` // wall time from the first restore's start to the last one's end
	Wiped          int     `json:",omitempty"`
	FirstRestore   float64 `json:",omitempty"` // s from Run to the first restore's start (group join, producers)
	ResumeFirst    float64 `json:",omitempty"` // s from Run to the first record processed
	ResumeAll      float64 `json:",omitempty"` // s from Run until every task processed a record

	// eddy commits (from its debug log) and sarama's retries (from its logger).
	Commits          int     `json:",omitempty"`
	CommitMeanMs     float64 `json:",omitempty"`
	CommitP50Ms      float64 `json:",omitempty"`
	CommitP99Ms      float64 `json:",omitempty"`
	CommitTotalSec   float64 `json:",omitempty"`
	Aborts           int     `json:",omitempty"`
	TaskStarts       int     `json:",omitempty"`
	AddPartRetries   int64   `json:",omitempty"`
	EndTxnRetries    int64   `json:",omitempty"`
	OffsetTxnRetries int64   `json:",omitempty"`
	OtherSaramaLogs  int64   `json:",omitempty"`
	// Commit phases (commitphases.go): mean and p99 per phase, and the AddPartitionsToTxn
	// retries' backoff summed.
	PhaseMeanMs      map[string]float64 `json:",omitempty"`
	PhaseP99Ms       map[string]float64 `json:",omitempty"`
	AddPartBackoffMs float64            `json:",omitempty"`

	// sarama's metrics (all clients of the child).
	RecordsPerProduce  float64          `json:",omitempty"` // records per produce request (mean of a sample)
	ProduceBatchBytes  float64          `json:",omitempty"` // bytes per record batch
	ConsumerBatch      float64          `json:",omitempty"` // records per partition per fetch
	FetchResponseBytes float64          `json:",omitempty"`
	RequestLatencyMs   float64          `json:",omitempty"`
	Requests           map[string]int64 `json:",omitempty"` // by API name

	// PostgreSQL sink rows: the target's Prepare (two-phase: the buffered rows, the
	// marker and PREPARE TRANSACTION; upsert: the last batch and COMMIT) and Commit
	// (COMMIT PREPARED), per task transaction; the time spent in Write (upsert: the full
	// batches, each written and committed there).
	SinkPrepares     int     `json:",omitempty"`
	SinkPrepareP50Ms float64 `json:",omitempty"`
	SinkPrepareP99Ms float64 `json:",omitempty"`
	SinkPrepareSec   float64 `json:",omitempty"`
	SinkCommits      int     `json:",omitempty"`
	SinkCommitP50Ms  float64 `json:",omitempty"`
	SinkCommitP99Ms  float64 `json:",omitempty"`
	SinkCommitSec    float64 `json:",omitempty"`
	SinkWriteSec     float64 `json:",omitempty"`

	// Cost-per-task rows: what the process holds, sampled every 100 ms; "AtStop" when
	// the parent stops it (all input processed, idle commits running).
	Sockets        int `json:",omitempty"` // open sockets (/proc/self/fd), at stop
	SocketsPeak    int `json:",omitempty"`
	FDs            int `json:",omitempty"` // open file descriptors, at stop
	Goroutines     int `json:",omitempty"` // at stop
	GoroutinesPeak int `json:",omitempty"`

	// The Go runtime.
	Mallocs    uint64  `json:",omitempty"`
	AllocBytes uint64  `json:",omitempty"`
	NumGC      uint32  `json:",omitempty"`
	GCPauseMs  float64 `json:",omitempty"`
}

const resultPrefix = "BENCH-RESULT "

// childMain runs one row in this process and prints its result; the exit code is 0 when
// the row ran to its end.
func childMain(ctx context.Context, kind, specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench child: bad -child-spec:", err)
		return 2
	}
	res := &childResult{}
	stats := newSaramaStats(log.New(os.Stderr, "sarama: ", log.LstdFlags|log.Lmicroseconds))
	sarama.Logger = stats // sarama has one package-level logger; this process is ours
	sarama.DebugLogger = debugLogger{stats.phases}
	reg := metrics.NewRegistry()
	// sarama unregisters a broker connection's metrics when it closes, so take them when
	// the parent asks the child to stop, before the clients close (or at the end).
	snap := &metricsSnapshot{reg: reg, heapProfile: spec.ProfilePrefix}
	if spec.SampleCost {
		snap.cost = newCostSampler()
		defer snap.cost.stop()
	}
	snapDone := make(chan struct{})
	childDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		select {
		case <-ctx.Done():
			snap.take()
		case <-childDone:
		}
	}()
	stopProfiles, err := startProfiles(spec.ProfilePrefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 2
	}
	switch kind {
	case "pipe-raw":
		err = runPipeRaw(ctx, &spec, reg)
	case "pipe-txn":
		err = runPipeTxn(ctx, &spec, reg, res)
	case "pipe-txn-2hop":
		err = runPipeTxn2Hop(ctx, &spec, reg, res)
	case "eddy":
		if spec.Status {
			err = runScale(ctx, &spec, reg, res, os.Stdout)
		} else {
			err = runEddy(ctx, &spec, reg, res)
		}
	case "pg-copy":
		err = runPGCopy(ctx, &spec, reg, res)
	case "pg-pipe":
		err = runPGPipe(ctx, &spec, reg)
	case "restore":
		err = runRestore(ctx, &spec, reg, res, snap.take)
	case "changelog-read":
		err = runChangelogRead(ctx, &spec, reg, res, snap.take)
	case "changelog-kread":
		err = runChangelogKread(ctx, &spec, reg, res, snap.take)
	default:
		err = fmt.Errorf("unknown child kind %q", kind)
	}
	close(childDone)
	<-snapDone
	snap.take()
	if perr := stopProfiles(); perr != nil {
		err = errors.Join(err, perr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		res.Err = err.Error()
		fmt.Fprintln(os.Stderr, "bench child:", err)
	}
	stats.fill(res)
	snap.fill(res)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.Mallocs, res.AllocBytes, res.NumGC = ms.Mallocs, ms.TotalAlloc, ms.NumGC
	res.GCPauseMs = float64(ms.PauseTotalNs) / 1e6
	b, jerr := json.Marshal(res)
	if jerr != nil {
		fmt.Fprintln(os.Stderr, "bench child:", jerr)
		return 1
	}
	fmt.Println(resultPrefix + string(b))
	if res.Err != "" {
		return 1
	}
	return 0
}

// startProfiles starts the CPU profile and the mutex profile; the returned function
// stops them and writes the allocation and mutex profiles.
func startProfiles(prefix string) (func() error, error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	cpu, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		_ = cpu.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	runtime.SetMutexProfileFraction(20)
	stopPeak := peakHeapProfiles(prefix + ".peak.heap.pprof")
	return func() error {
		stopPeak()
		pprof.StopCPUProfile()
		errs := []error{cpu.Close()}
		for _, name := range []string{"allocs", "mutex"} {
			f, err := os.Create(prefix + "." + name + ".pprof")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, pprof.Lookup(name).WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}

// peakHeapProfiles writes a heap profile to path whenever the heap in use has grown a
// tenth past what the last one saw (checked every 200 ms), until the returned function is
// called: the profile taken at the end shows what the application holds when it is done,
// not what made its peak RSS.
func peakHeapProfiles(path string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // owned by the returned stop
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		var last uint64
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse < last+last/10 {
				continue
			}
			last = ms.HeapInuse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// saramaStats is sarama's logger in a child: it counts the transaction manager's retries
// (CONCURRENT_TRANSACTIONS after a commit shows up as add-partition retries) and writes
// every line to the child's log.
type saramaStats struct {
	addPart, endTxn, offsets, other atomic.Int64
	out                             *log.Logger
	phases                          *phaseClock
}

func newSaramaStats(out *log.Logger) *saramaStats {
	return &saramaStats{out: out, phases: newPhaseClock()}
}

func (s *saramaStats) count(format string) {
	switch {
	case strings.HasPrefix(format, "txnmgr/add-partition-to-txn retrying"):
		s.addPart.Add(1)
	case strings.HasPrefix(format, "txnmgr/endtxn") && strings.Contains(format, "retrying"):
		s.endTxn.Add(1)
	case (strings.HasPrefix(format, "txnmgr/add-offset-to-txn") || strings.HasPrefix(format, "txnmgr/txn-offset-commit")) && strings.Contains(format, "retrying"):
		s.offsets.Add(1)
	default:
		s.other.Add(1)
	}
}

func (s *saramaStats) Print(v ...any) {
	s.count(fmt.Sprint(v...))
	s.out.Print(v...)
}

func (s *saramaStats) Printf(format string, v ...any) {
	s.count(format)
	s.phases.retried(format, v)
	s.out.Printf(format, v...)
}

func (s *saramaStats) Println(v ...any) {
	s.count(fmt.Sprint(v...))
	s.out.Println(v...)
}

func (s *saramaStats) fill(r *childResult) {
	r.AddPartRetries, r.EndTxnRetries = s.addPart.Load(), s.endTxn.Load()
	r.OffsetTxnRetries, r.OtherSaramaLogs = s.offsets.Load(), s.other.Load()
	s.phases.fill(r)
}

// apiNames lists the request kinds (API key, name) whose counts a child reports.
func apiNames() []struct {
	key  int16
	name string
} {
	return []struct {
		key  int16
		name string
	}{
		{0, "Produce"}, {1, "Fetch"}, {2, "ListOffsets"}, {8, "OffsetCommit"}, {9, "OffsetFetch"},
		{24, "AddPartitionsToTxn"}, {25, "AddOffsetsToTxn"}, {26, "EndTxn"}, {28, "TxnOffsetCommit"},
	}
}

// metricsSnapshot keeps sarama's metrics as they were at the first take, and writes a
// heap profile then (while the application still runs) when profiling.
type metricsSnapshot struct {
	reg         metrics.Registry
	heapProfile string       // prefix; empty: none
	cost        *costSampler // nil: not sampled
	once        sync.Once
	taken       childResult
}

func (m *metricsSnapshot) take() {
	m.once.Do(func() {
		if m.cost != nil {
			m.cost.take(&m.taken)
		}
		fillMetrics(m.reg, &m.taken)
		if m.heapProfile != "" {
			if f, err := os.Create(m.heapProfile + ".heap.pprof"); err == nil {
				runtime.GC()
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	})
}

func (m *metricsSnapshot) fill(r *childResult) {
	r.RecordsPerProduce, r.ProduceBatchBytes = m.taken.RecordsPerProduce, m.taken.ProduceBatchBytes
	r.ConsumerBatch, r.FetchResponseBytes = m.taken.ConsumerBatch, m.taken.FetchResponseBytes
	r.RequestLatencyMs, r.Requests = m.taken.RequestLatencyMs, m.taken.Requests
	r.Sockets, r.SocketsPeak, r.FDs = m.taken.Sockets, m.taken.SocketsPeak, m.taken.FDs
	r.Goroutines, r.GoroutinesPeak = m.taken.Goroutines, m.taken.GoroutinesPeak
}

func fillMetrics(reg metrics.Registry, r *childResult) {
	mean := func(name string) float64 {
		if h, ok := reg.Get(name).(metrics.Histogram); ok {
			return h.Mean()
		}
		return 0
	}
	r.RecordsPerProduce = mean("records-per-request")
	r.ProduceBatchBytes = mean("batch-size")
	r.ConsumerBatch = mean("consumer-batch-size")
	r.FetchResponseBytes = mean("consumer-fetch-response-size")
	r.RequestLatencyMs = mean("request-latency-in-ms")
	for _, api := range apiNames() {
		if m, ok := reg.Get(fmt.Sprintf("protocol-requests-rate-%d", api.key)).(metrics.Meter); ok && m.Count() > 0 {
			if r.Requests == nil {
				r.Requests = map[string]int64{}
			}
			r.Requests[api.name] = m.Count()
		}
	}
}

// durationStats summarizes commit durations.
type durationStats struct {
	mu sync.Mutex
	ds []time.Duration
}

func (d *durationStats) add(x time.Duration) {
	d.mu.Lock()
	d.ds = append(d.ds, x)
	d.mu.Unlock()
}

func (d *durationStats) fill(r *childResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ds) == 0 {
		return
	}
	sort.Slice(d.ds, func(i, j int) bool { return d.ds[i] < d.ds[j] })
	var sum time.Duration
	for _, x := range d.ds {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	r.Commits = len(d.ds)
	r.CommitMeanMs = ms(sum / time.Duration(len(d.ds)))
	r.CommitP50Ms = ms(d.ds[len(d.ds)/2])
	r.CommitP99Ms = ms(d.ds[min(len(d.ds)-1, len(d.ds)*99/100)])
	r.CommitTotalSec = sum.Seconds()
}

// saramaBase is the consumer configuration every pipe and reader starts from: eddy's own
// base (Config.saramaConfig) so that the pipes and eddy differ only in what eddy adds.
func saramaBase(spec *childSpec, reg metrics.Registry, clientID string) *sarama.Config {
	sc := sarama.NewConfig()
	sc.ClientID = clientID
	sc.Version = sarama.V3_9_0_0
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	sc.Consumer.Group.Session.Timeout = 10 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = time.Second
	sc.Consumer.Group.Rebalance.Timeout = 60 * time.Second
	sc.Metadata.RefreshFrequency = time.Minute
	sc.MetricRegistry = reg
	spec.Tune.apply(sc)
	return sc
}

// apply sets the tuning's non-zero settings on a sarama configuration.
func (t tuning) apply(sc *sarama.Config) {
	if t.TxnBackoff > 0 {
		sc.Producer.Transaction.Retry.Backoff = t.TxnBackoff
	}
	if t.Linger > 0 {
		sc.Producer.Flush.Frequency = t.Linger
	}
	if t.FlushBytes > 0 {
		sc.Producer.Flush.Bytes = t.FlushBytes
	}
	if t.FetchDefault > 0 {
		sc.Consumer.Fetch.Default = t.FetchDefault
	}
	if t.ChannelBuffer > 0 {
		sc.ChannelBufferSize = t.ChannelBuffer
	}
	if t.MaxWait > 0 {
		sc.Consumer.MaxWaitTime = t.MaxWait
	}
}
