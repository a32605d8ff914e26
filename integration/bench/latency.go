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
		in, out := id+"-in", id+"-out"
		for _, t := range []string{in, out} {
			if err := e.createTopic(ctx, t, P, nil); err != nil {
				return nil, err
			}
		}
		spec := childSpec{Row: r.name, Input: in, Output: out, Group: id, Partitions: P, CommitInterval: 100 * time.Millisecond}
		if kind == "eddy" {
			spec.Topology, spec.ExactlyOnce, spec.StateDir = "passthrough", eos, e.stateDir(id)
		}
		reader, err := newLatencyReader(e, out, P)
		if err != nil {
			return nil, err
		}
		defer reader.close()
		c, err := e.startChild(kind, fmt.Sprintf("%s-r%d", r.name, round), spec)
		if err != nil {
			return nil, err
		}
		defer c.kill()
		lr, err := e.driveLatency(ctx, c, in, P, reader)
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
}

// driveLatency waits until the pipeline passes a probe record per partition, then
// writes e.latencyRate records per second for -latency-duration and waits for them.
func (e *env) driveLatency(ctx context.Context, c *child, topic string, P int32, reader *latencyReader) (*runResult, error) {
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
	send := func(key []byte, p int32, probe bool) {
		v := randomValue(e.rng, e.o.valueSize)
		if probe {
			v[0] = 'P'
		} else {
			v[0] = 'M'
		}
		prod.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: p, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(v), Timestamp: time.Now()}
	}
	for p := range P {
		send(fmt.Appendf(nil, "probe-%d", p), p, true)
	}
	if err := reader.waitProbes(ctx, c, int(P), 120*time.Second); err != nil {
		return nil, err
	}
	rate := e.latencyRate
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for time.Since(began) < e.o.latDuration {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			key := benchKey(uint64(sent))
			send(key, partition.ForKey(key, P), false)
		}
	}
	if err := reader.waitMeasured(ctx, c, sent, 60*time.Second); err != nil {
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
		Units: int64(sent), Seconds: e.o.latDuration.Seconds(), Rate: float64(rate),
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
					now := time.Now()
					lr.mu.Lock()
					if len(m.Value) > 0 && m.Value[0] == 'P' {
						lr.probes++
					} else {
						lr.lat = append(lr.lat, float64(now.Sub(m.Timestamp))/float64(time.Millisecond))
					}
					lr.mu.Unlock()
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

func (lr *latencyReader) close() {
	select {
	case <-lr.stop:
	default:
		close(lr.stop)
	}
	lr.wg.Wait()
	_ = lr.consumer.Close()
}

func (lr *latencyReader) counts() (probes, measured int, err error) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.probes, len(lr.lat), errors.Join(lr.errs...)
}

func (lr *latencyReader) latencies() []float64 {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return slices.Clone(lr.lat)
}

func (lr *latencyReader) waitProbes(ctx context.Context, c *child, want int, timeout time.Duration) error {
	return lr.waitFor(ctx, c, timeout, func() (bool, error) {
		p, _, err := lr.counts()
		return p >= want, err
	})
}

func (lr *latencyReader) waitMeasured(ctx context.Context, c *child, want int, timeout time.Duration) error {
	return lr.waitFor(ctx, c, timeout, func() (bool, error) {
		_, m, err := lr.counts()
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
			p, m, _ := lr.counts()
			return fmt.Errorf("latency run: still waiting after %v (%d probes, %d records read; log: %s)", timeout, p, m, c.logPath)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}
