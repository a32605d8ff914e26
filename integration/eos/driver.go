//go:build unix

package eos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/kafkatest"
)

// DriverConfig configures the input driver.
type DriverConfig struct {
	Brokers    []string
	Topic      string
	Partitions int32
	// RightTopic, if set, gets a record after the input records Clock.WritesRight
	// picks: a key of its own, the value RightValueBase+seq and the timestamp of seq.
	// It has Partitions partitions.
	RightTopic string
	// Records is how many acknowledged records to write.
	Records int
	// Keys is the number of distinct keys, "k0000" ... .
	Keys int
	// Rate is the records per second to aim at; 0 writes as fast as the broker takes them.
	Rate float64
	// Allowed, if set, caps the records written so far (acknowledged or in flight):
	// the harness hands out the input fault by fault, so that every fault meets input
	// however long the faults before it took.
	Allowed func() int
	// Seed chooses the key of each record.
	Seed uint64
	// Clock gives each record its timestamp, from its value (sequence number); with a
	// zero Clock the producer's time.
	Clock  EventClock
	Logger *slog.Logger
}

// Acked is an input record the broker acknowledged.
type Acked struct {
	Partition int32
	Offset    int64
	Key       string
	Value     int64
}

// KeyName is the i-th key of the driver.
func KeyName(i int) string { return fmt.Sprintf("k%04d", i) }

// maxInFlight bounds the records sent but not yet acknowledged.
const maxInFlight = 2000

// Produce writes cfg.Records records with unique values (1, 2, 3, ... in the order
// they are sent) over cfg.Keys keys with an idempotent producer, each to the partition
// Kafka's default partitioner gives its key (murmur2, as eddy's sinks use), and returns
// every acknowledged record sorted by partition and offset. A record the producer
// reports as failed is not retried with the same value: the next record gets a new one,
// so values stay unique whatever a failed send left in the topic (the verifier takes
// the topic itself as the input and checks that every acknowledged record is in it).
// When a send fails, the producer is recreated once its in-flight records are settled.
func Produce(ctx context.Context, cfg DriverConfig) (acked, ackedRight []Acked, failed int, err error) {
	if cfg.Records < 1 || cfg.Keys < 1 || cfg.Partitions < 1 {
		return nil, nil, 0, fmt.Errorf("eos driver: records %d, keys %d, partitions %d: want at least 1 each", cfg.Records, cfg.Keys, cfg.Partitions)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x65647179))
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = KeyName(i)
	}
	sc := kafkatest.NewSaramaConfig()
	sc.ClientID = "eos-driver"
	sc.Producer.Idempotent = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	sc.Producer.Retry.Max = 1000 // rides out a broker restart
	sc.Producer.Retry.Backoff = 200 * time.Millisecond
	sc.Metadata.Retry.Max = 1000
	sc.Metadata.Retry.Backoff = 200 * time.Millisecond

	var p sarama.AsyncProducer
	open := func() error {
		for {
			var err error
			p, err = sarama.NewAsyncProducer(cfg.Brokers, sc)
			if err == nil {
				return nil
			}
			logger.Warn("eos driver: connecting", "error", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("eos driver: connect to %v: %w", cfg.Brokers, errors.Join(ctx.Err(), err))
			case <-time.After(time.Second):
			}
		}
	}
	if err := open(); err != nil {
		return nil, nil, 0, err
	}
	defer func() {
		if p != nil {
			_ = p.Close()
		}
	}()

	began := time.Now()
	next := int64(1)
	inFlight, rightInFlight := 0, 0
	// right is the Right record to send next, if any.
	var right *sarama.ProducerMessage
	broken := false
	// paced records were sent since paceFrom, the start of the current stretch at Rate.
	paceFrom, paced := began, 0
	lastLog := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	acked = make([]Acked, 0, cfg.Records)
	for len(acked) < cfg.Records || right != nil || rightInFlight > 0 {
		if broken && inFlight == 0 {
			logger.Info("eos driver: recreating the producer after a failed send")
			_ = p.Close()
			p = nil
			if err := open(); err != nil {
				return nil, nil, failed, err
			}
			broken = false
		}
		var input chan<- *sarama.ProducerMessage
		var msg *sarama.ProducerMessage
		due := cfg.Rate <= 0 || float64(paced) < cfg.Rate*time.Since(paceFrom).Seconds()
		allowed := cfg.Records
		if cfg.Allowed != nil {
			allowed = min(allowed, cfg.Allowed())
		}
		if due && len(acked)+inFlight-rightInFlight >= allowed {
			// Held back by Allowed: no credit builds up meanwhile, so the input
			// released next is written at Rate, not in one burst.
			paceFrom, paced = time.Now(), 0
		}
		switch {
		case broken || inFlight >= maxInFlight:
		case right != nil:
			msg = right
			input = p.Input()
		case due && len(acked)+inFlight-rightInFlight < allowed:
			key := keys[rng.IntN(len(keys))]
			msg = &sarama.ProducerMessage{
				Topic:     cfg.Topic,
				Partition: partition.ForKey([]byte(key), cfg.Partitions),
				Key:       sarama.StringEncoder(key),
				Value:     sarama.ByteEncoder(EncodeInt64(next)),
				Metadata:  sentRecord{key: key, value: next},
			}
			if cfg.Clock.StepMs > 0 {
				msg.Timestamp = time.UnixMilli(cfg.Clock.At(next))
			}
			input = p.Input()
		}
		select {
		case input <- msg:
			inFlight++
			if msg == right {
				right = nil
				rightInFlight++
				break
			}
			if cfg.RightTopic != "" && cfg.Clock.WritesRight(next) {
				key := keys[rng.IntN(len(keys))]
				right = &sarama.ProducerMessage{
					Topic:     cfg.RightTopic,
					Partition: partition.ForKey([]byte(key), cfg.Partitions),
					Key:       sarama.StringEncoder(key),
					Value:     sarama.ByteEncoder(EncodeInt64(RightValueBase + next)),
					Metadata:  sentRecord{key: key, value: RightValueBase + next, right: true},
					Timestamp: msg.Timestamp,
				}
			}
			next++
			paced++
		case m := <-p.Successes():
			inFlight--
			r := m.Metadata.(sentRecord)
			a := Acked{Partition: m.Partition, Offset: m.Offset, Key: r.key, Value: r.value}
			if r.right {
				rightInFlight--
				ackedRight = append(ackedRight, a)
			} else {
				acked = append(acked, a)
			}
		case pe := <-p.Errors():
			inFlight--
			if pe.Msg.Metadata.(sentRecord).right {
				rightInFlight--
			}
			failed++
			if !broken {
				logger.Warn("eos driver: send failed; its value is not reused", "value", pe.Msg.Metadata.(sentRecord).value, "error", pe.Err)
			}
			broken = true
		case <-tick.C:
		case <-ctx.Done():
			return nil, nil, failed, fmt.Errorf("eos driver: %d of %d records acknowledged: %w", len(acked), cfg.Records, ctx.Err())
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			logger.Info("eos driver: progress", "acked", len(acked), "records", cfg.Records, "failed", failed)
		}
	}
	err = p.Close()
	p = nil
	if err != nil {
		// Every record was acknowledged; a close error changes nothing of that.
		logger.Warn("eos driver: closing the producer", "error", err)
	}
	byPosition := func(a, b Acked) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	}
	slices.SortFunc(acked, byPosition)
	slices.SortFunc(ackedRight, byPosition)
	logger.Info("eos driver: done", "acked", len(acked), "acked_right", len(ackedRight), "failed", failed, "took", time.Since(began).Round(time.Millisecond))
	return acked, ackedRight, failed, nil
}

type sentRecord struct {
	key   string
	value int64
	right bool
}
