//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/partition"
)

// chooseLatencyRate sets the input rate of the latency rows: -latency-rate, or half the
// median rate of pass-eos-100ms measured in this invocation.
func (e *env) chooseLatencyRate() error {
	if e.o.latRate > 0 {
		e.latencyRate, e.latencyRateDerivedFrom = e.o.latRate, "-latency-rate"
		return nil
	}
	var rates []float64
	for _, r := range e.results {
		if r.Row == "pass-eos-100ms" && !r.Warmup {
			rates = append(rates, r.Rate)
		}
	}
	if len(rates) == 0 {
		return errors.New("latency rows: no pass-eos-100ms result to take half the maximum rate of; add the row or give -latency-rate")
	}
	e.latencyRate = int(median(rates) / 2)
	e.latencyRateDerivedFrom = fmt.Sprintf("half the median rate of pass-eos-100ms (%.0f/s)", median(rates))
	e.logf("latency rows: %d records/s (%s)", e.latencyRate, e.latencyRateDerivedFrom)
	return nil
}

// latencyRow runs a pipeline (pipe-txn or eddy passthrough) while the parent writes
// input at the chosen rate, each record stamped with the time it is produced, and reads
// the output with read_committed: a record's latency is the time it is read minus its
// timestamp (which the pipelines carry over).
func latencyRow(kind string, eos bool) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		P := int32(e.o.partitions)
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		spec := childSpec{Row: r.name, Input: id + "-in", Output: id + "-out", Group: id, Partitions: P, CommitInterval: 100 * time.Millisecond}
		if kind == "eddy" {
			spec.Topology, spec.ExactlyOnce, spec.StateDir = "passthrough", eos, e.stateDir(id)
		}
		return e.runLatency(ctx, kind, fmt.Sprintf("%s-r%d", r.name, round), spec, false, e.recordSource(P))
	}
}

// runLatency makes the child's input and output topics, starts the child and drives it
// at the chosen rate; words says its output is a word count's.
func (e *env) runLatency(ctx context.Context, kind, name string, spec childSpec, words bool, src latencySource) (*runResult, error) {
	for _, t := range []string{spec.Input, spec.Output} {
		if err := e.createTopic(ctx, t, spec.Partitions, nil); err != nil {
			return nil, err
		}
	}
	reader, err := newLatencyReader(e, spec.Output, spec.Partitions)
	if err != nil {
		return nil, err
	}
	defer reader.close()
	if words {
		reader.countWords()
	}
	c, err := e.startChild(kind, name, spec)
	if err != nil {
		return nil, err
	}
	defer c.kill()
	lr, err := e.driveLatency(ctx, c, spec.Input, spec.Partitions, reader, src)
	if err != nil {
		return nil, err
	}
	c.stop(60 * time.Second)
	res, u, err := c.result()
	if err != nil {
		return nil, err
	}
	lr.CPU, lr.MaxRSSMB, lr.PeakAnonMB, lr.PeakFileMB, lr.Child = u.CPU, u.MaxRSSMB, u.PeakAnonMB, u.PeakFileMB, res
	return lr, nil
}

// latencySource makes a latency row's input: a probe record per partition, then record
// i with the units it carries (records, or a line's words).
type latencySource struct {
	probe func(p int32) (key, value []byte)
	next  func(i int) (key, value []byte, p int32, units int)
}

// recordSource is the passthrough's input: key i of the key space on its partition, a
// random value marked 'M' (probes: 'P').
func (e *env) recordSource(P int32) latencySource {
	value := func(mark byte) []byte {
		v := randomValue(e.rng, e.o.valueSize)
		v[0] = mark
		return v
	}
	return latencySource{
		probe: func(p int32) ([]byte, []byte) { return fmt.Appendf(nil, "probe-%d", p), value('P') },
		next: func(i int) ([]byte, []byte, int32, int) {
			key := benchKey(uint64(i))
			return key, value('M'), partition.ForKey(key, P), 1
		},
	}
}

// driveLatency waits until the pipeline passes a probe record per partition, then
// writes e.latencyRate records per second for -latency-duration and waits for them.
func (e *env) driveLatency(ctx context.Context, c *child, topic string, P int32, reader *latencyReader, src latencySource) (*runResult, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = e.o.prefix + "-latency-writer"
	cfg.Version = sarama.V3_9_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Errors = true
	prod, err := sarama.NewAsyncProducer(e.o.brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("latency producer: %w", err)
	}
	var prodErr error
	var mu sync.Mutex
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for pe := range prod.Errors() {
			mu.Lock()
			prodErr = errors.Join(prodErr, pe)
			mu.Unlock()
		}
	}()
	defer func() {
		_ = prod.Close()
		<-errsDone
	}()
	send := func(key, value []byte, p int32) {
		m := &sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.ByteEncoder(value), Timestamp: time.Now()}
		if key != nil {
			m.Key = sarama.ByteEncoder(key)
		}
		prod.Input() <- m
	}
	for p := range P {
		key, value := src.probe(p)
		send(key, value, p)
	}
	if err := reader.waitProbes(ctx, c, int(P), 120*time.Second); err != nil {
		return nil, err
	}
	rate := e.latencyRate
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	sent, units := 0, 0
	for time.Since(began) < e.o.latDuration {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			key, value, p, n := src.next(sent)
			send(key, value, p)
			units += n
		}
	}
	if err := reader.waitMeasured(ctx, c, units, 60*time.Second); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if prodErr != nil {
		return nil, fmt.Errorf("latency producer: %w", prodErr)
	}
	lat := reader.latencies()
	slices.Sort(lat)
	pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	return &runResult{
		Units: int64(units), Seconds: e.o.latDuration.Seconds(), Rate: float64(rate),
		P50: pct(0.50), P99: pct(0.99), Max: lat[len(lat)-1], LatRate: rate, LatCount: len(lat),
	}, nil
}

// latencyReader reads a topic with read_committed and records each record's latency.
type latencyReader struct {
	consumer sarama.Consumer
	wg       sync.WaitGroup
	stop     chan struct{}

	mu     sync.Mutex
	probes int
	lat    []float64 // ms
	errs   []error
	// counts, for a word count's output (newWordLatencyReader): each word's highest
	// count read, the probe word's among them; nil for records passed through.
	counts map[string]int64
	// counted is the sum of counts but the probe word's: the words processed.
	counted int64
}

func newLatencyReader(e *env, topic string, P int32) (*latencyReader, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = e.o.prefix + "-latency-reader"
	cfg.Version = sarama.V3_9_0_0
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.MaxWaitTime = 10 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	consumer, err := sarama.NewConsumer(e.o.brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("latency reader: %w", err)
	}
	lr := &latencyReader{consumer: consumer, stop: make(chan struct{})}
	for p := range P {
		// A topic made a moment ago may not have its leaders everywhere yet: retry.
		var pc sarama.PartitionConsumer
		for attempt := 0; ; attempt++ {
			pc, err = consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
			if err == nil {
				break
			}
			if attempt >= 50 {
				lr.close()
				return nil, fmt.Errorf("latency reader partition %d: %w", p, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		lr.wg.Go(func() {
			defer pc.AsyncClose()
			for {
				select {
				case m := <-pc.Messages():
					lr.read(m, time.Now())
				case err := <-pc.Errors():
					lr.mu.Lock()
					lr.errs = append(lr.errs, err)
					lr.mu.Unlock()
				case <-lr.stop:
					return
				}
			}
		})
	}
	return lr, nil
}

// read takes an output record read at now: a probe, or a latency to record.
func (lr *latencyReader) read(m *sarama.ConsumerMessage, now time.Time) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.counts != nil {
		lr.readCount(m, now)
		return
	}
	if len(m.Value) > 0 && m.Value[0] == 'P' {
		lr.probes++
		return
	}
	lr.lat = append(lr.lat, float64(now.Sub(m.Timestamp))/float64(time.Millisecond))
}

func (lr *latencyReader) close() {
	select {
	case <-lr.stop:
	default:
		close(lr.stop)
	}
	lr.wg.Wait()
	_ = lr.consumer.Close()
}

// progress is how many probes and measured units the reader has seen: records, or the
// words counted.
func (lr *latencyReader) progress() (probes, measured int, err error) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.counts != nil {
		return int(lr.counts[probeWord]), int(lr.counted), errors.Join(lr.errs...)
	}
	return lr.probes, len(lr.lat), errors.Join(lr.errs...)
}

func (lr *latencyReader) latencies() []float64 {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return slices.Clone(lr.lat)
}

func (lr *latencyReader) waitProbes(ctx context.Context, c *child, want int, timeout time.Duration) error {
	return lr.waitFor(ctx, c, timeout, func() (bool, error) {
		p, _, err := lr.progress()
		return p >= want, err
	})
}

func (lr *latencyReader) waitMeasured(ctx context.Context, c *child, want int, timeout time.Duration) error {
	return lr.waitFor(ctx, c, timeout, func() (bool, error) {
		_, m, err := lr.progress()
		return m >= want, err
	})
}

func (lr *latencyReader) waitFor(ctx context.Context, c *child, timeout time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := ok()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if c.exited() {
			return fmt.Errorf("child %s exited during the latency run (log: %s)%s", c.name, c.logPath, logTail(c.logPath))
		}
		if time.Now().After(deadline) {
			p, m, _ := lr.progress()
			return fmt.Errorf("latency run: still waiting after %v (%d probes, %d records read; log: %s)", timeout, p, m, c.logPath)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}
