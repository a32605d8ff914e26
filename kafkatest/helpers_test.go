package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// txnConfig is the transactional producer configuration eddy's runtime uses
// (design §8): idempotent, a transactional ID, acks=all, one request in
// flight per broker, a 10 s transaction timeout.
func txnConfig(txnID string) *sarama.Config {
	cfg := kafkatest.NewSaramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.Transaction.Timeout = 10 * time.Second
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	return cfg
}

// txnProducer is a transactional AsyncProducer whose send waits for every
// message's success or error, so nothing is left undrained between calls.
type txnProducer struct {
	sarama.AsyncProducer
}

func newTxnProducer(t *testing.T, c *kafkatest.Cluster, cfg *sarama.Config) *txnProducer {
	t.Helper()
	p, err := sarama.NewAsyncProducer(c.Addrs(), cfg)
	if err != nil {
		t.Fatalf("new transactional producer %q: %v", cfg.Producer.Transaction.ID, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &txnProducer{p}
}

// send produces msgs and returns the errors of those that failed, joined. It reads
// the answers while it sends: a producer whose Errors channel is full stops taking
// input, so a burst larger than its buffers that fails would otherwise never finish.
func (p *txnProducer) send(ctx context.Context, msgs ...*sarama.ProducerMessage) error {
	var errs []error
	sent, answered := 0, 0
	for answered < len(msgs) {
		var input chan<- *sarama.ProducerMessage
		var next *sarama.ProducerMessage
		if sent < len(msgs) {
			input, next = p.Input(), msgs[sent]
		}
		select {
		case input <- next:
			sent++
		case <-p.Successes():
			answered++
		case perr := <-p.Errors():
			errs = append(errs, perr)
			answered++
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

func msg(topic string, partition int32, value string) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: topic, Partition: partition, Value: sarama.StringEncoder(value)}
}

func values(msgs []*sarama.ConsumerMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

// liveGroup is a consumer-group member running in the background. Its
// current session and the records it consumes are handed to the test.
type liveGroup struct {
	group    sarama.ConsumerGroup
	sessions chan sarama.ConsumerGroupSession
	messages chan *sarama.ConsumerMessage
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	errors []error
	setups []map[string][]int32 // claims at each Setup, in order
	hooks  groupHooks
}

type groupHooks struct {
	setup func(sarama.ConsumerGroupSession)
}

// groupConfig is a consumer configuration for fast tests: reads committed
// data from the oldest offset, never auto-commits (offsets go through
// transactions), short session and heartbeat.
func groupConfig() *sarama.Config {
	cfg := kafkatest.NewSaramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	return cfg
}

func joinGroup(t *testing.T, c *kafkatest.Cluster, cfg *sarama.Config, group string, topics []string, hooks groupHooks) *liveGroup {
	t.Helper()
	g, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
	if err != nil {
		t.Fatalf("new consumer group %q: %v", group, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lg := &liveGroup{
		group:    g,
		sessions: make(chan sarama.ConsumerGroupSession, 64),
		messages: make(chan *sarama.ConsumerMessage, 1024),
		cancel:   cancel,
		done:     make(chan struct{}),
		hooks:    hooks,
	}
	go func() {
		for err := range g.Errors() {
			lg.addError(err)
		}
	}()
	go func() {
		defer close(lg.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, topics, lg); err != nil && ctx.Err() == nil {
				lg.addError(err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(lg.close)
	return lg
}

func (lg *liveGroup) addError(err error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.errors = append(lg.errors, err)
}

func (lg *liveGroup) errs() []error {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return append([]error(nil), lg.errors...)
}

func (lg *liveGroup) close() {
	lg.cancel()
	<-lg.done
	_ = lg.group.Close()
}

// Setup implements sarama.ConsumerGroupHandler.
func (lg *liveGroup) Setup(s sarama.ConsumerGroupSession) error {
	lg.mu.Lock()
	lg.setups = append(lg.setups, s.Claims())
	lg.mu.Unlock()
	if lg.hooks.setup != nil {
		lg.hooks.setup(s)
	}
	lg.sessions <- s
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (lg *liveGroup) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim implements sarama.ConsumerGroupHandler.
func (lg *liveGroup) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case lg.messages <- m:
			case <-s.Context().Done():
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// session waits for the member's next session.
func (lg *liveGroup) session(ctx context.Context, t *testing.T) sarama.ConsumerGroupSession {
	t.Helper()
	select {
	case s := <-lg.sessions:
		return s
	case <-ctx.Done():
		t.Fatalf("no consumer-group session: %v (group errors: %v)", ctx.Err(), lg.errs())
		return nil
	}
}

// take waits for n consumed records.
func (lg *liveGroup) take(ctx context.Context, t *testing.T, n int) []*sarama.ConsumerMessage {
	t.Helper()
	out := make([]*sarama.ConsumerMessage, 0, n)
	for len(out) < n {
		select {
		case m := <-lg.messages:
			out = append(out, m)
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d records: %v (group errors: %v)", len(out), n, ctx.Err(), lg.errs())
		}
	}
	return out
}

// consumePartition reads [from, until) of one partition with a plain sarama
// consumer at the given isolation level and returns the record values; it
// stops at the first record at or past until, or when ctx ends.
func consumeValues(ctx context.Context, c *kafkatest.Cluster, topic string, partition int32, isolation sarama.IsolationLevel, n int) ([]string, error) {
	cfg := kafkatest.NewSaramaConfig()
	cfg.Consumer.IsolationLevel = isolation
	consumer, err := sarama.NewConsumer(c.Addrs(), cfg)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var out []string
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
		case err := <-pc.Errors():
			return out, err
		case <-ctx.Done():
			return out, fmt.Errorf("got %d of %d records: %w", len(out), n, ctx.Err())
		}
	}
	return out, nil
}

// quiet reads from a plain consumer for d and returns anything it got beyond
// what consumeValues already returned: used to prove that nothing more
// (aborted or fenced records) becomes visible.
func consumeFor(c *kafkatest.Cluster, topic string, partition int32, isolation sarama.IsolationLevel, d time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := consumeValues(ctx, c, topic, partition, isolation, 1<<30)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	return out, err
}
