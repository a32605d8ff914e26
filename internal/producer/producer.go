// Package producer is the producer of one task: under exactly-once a transactional
// sarama producer with the transactional ID <applicationID>-<taskID>, under at-least-once
// an idempotent one.
//
// A transactional producer is created before its task reads its committed input offset:
// creating it runs InitProducerId, which fences every older producer of the task and
// completes or aborts its open transaction, so the offset read afterwards is stable.
//
// The task's goroutine drives it: Send (begins the transaction on first use), Flush
// (waits for every acknowledgement and learns the offsets the records got), Commit (adds
// the consumed offsets with the live consumer-group metadata, then commits) or Abort.
// Errors are sorted by Classify into the classes of package txproducer, what the task
// does next: retry, abort and
// reprocess, recreate the producer, or drop the task because another instance owns it.
package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kafkaerr"
	"github.com/eddy-streams/eddy/txproducer"
)

// Config makes a Producer.
type Config struct {
	// Brokers to connect to.
	Brokers []string
	// Sarama is the base sarama configuration (TLS, SASL, version, ...). It is copied;
	// the producer settings exactly-once needs are set on the copy.
	Sarama *sarama.Config
	// TransactionalID makes the producer transactional; empty: idempotent only.
	TransactionalID string
	// TransactionTimeout bounds how long an orphaned transaction can block
	// read_committed readers; default 10 s, as Kafka Streams.
	TransactionTimeout time.Duration
	// Client, for a non-transactional producer, is a client to share (its config must
	// allow idempotence); nil: the producer makes its own.
	Client sarama.Client
}

// Producer is one task's producer. Send, Flush, Commit and Abort are called from the
// task's goroutine; a background goroutine owned by the producer drains acknowledgements
// and errors until Close.
type Producer struct {
	txnID  string
	client sarama.Client
	own    bool // the producer made client and closes it
	ap     sarama.AsyncProducer
	// began is when the open transaction began (zero: none since the last commit or
	// abort), for OpenFor. The task's goroutine alone uses it.
	began time.Time

	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending == 0
	errs    []error
	offsets map[topicPartition]int64 // highest acknowledged offset per partition
	// unsettled is, per partition, the bytes of the records sent with a batch limit
	// (SendWithin) and not yet acknowledged or failed: what sarama may still put into
	// one record batch.
	unsettled map[topicPartition]int

	drained chan struct{}
	closed  bool
	// unknown is set when a commit or abort outlived its context: its outcome is
	// unknown and the producer serves no more calls; the task recreates it.
	unknown error
	// callMu guards calling and closeAfterCall: while a bounded call that outlived its
	// context still runs, Close leaves the closing to that call's goroutine (closing
	// sarama's producer under a running CommitTxn is a data race in sarama).
	callMu         sync.Mutex
	calling        bool
	closeAfterCall bool
}

type topicPartition struct {
	topic     string
	partition int32
}

// SaramaConfig returns a copy of base with the producer settings exactly-once (or, with
// an empty transactional ID, idempotence) requires.
func SaramaConfig(base *sarama.Config, txnID string, txnTimeout time.Duration) *sarama.Config {
	c := *base
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	if c.Producer.Retry.Max < 10 {
		c.Producer.Retry.Max = 10
	}
	c.Producer.Transaction.ID = txnID
	if txnID != "" {
		if txnTimeout <= 0 {
			txnTimeout = 10 * time.Second
		}
		c.Producer.Transaction.Timeout = txnTimeout
		if c.Producer.Transaction.Retry.Max < 50 {
			c.Producer.Transaction.Retry.Max = 50
		}
	}
	return &c
}

// New creates the producer. A transactional producer runs InitProducerId here, which
// fences older producers of the same transactional ID and settles their open
// transaction; it gives up when ctx ends (the creation then goes on in the background
// and its producer is closed). A task that may create its producer more than once uses a
// Creator, so that two creations never race.
func New(ctx context.Context, cfg Config) (*Producer, error) {
	c := NewCreator(cfg)
	p, err := c.Create(ctx)
	c.Close()
	return p, err
}

// Creator creates the producers of one transactional ID, one at a time. sarama's
// InitProducerId does not take a context: it retries on its own for as long as its
// configuration says. A creation that outlives the caller's context therefore goes on,
// and the next Create waits for it and takes its producer, instead of sending a second
// InitProducerId beside it: whichever of two concurrent creations the coordinator answers
// last fences the other, which could be the producer the task went on with.
type Creator struct {
	cfg Config

	mu      sync.Mutex
	pending chan created // the creation under way, if any
	closed  bool
}

type created struct {
	p   *Producer
	err error
}

// NewCreator returns a Creator for producers made from cfg.
func NewCreator(cfg Config) *Creator { return &Creator{cfg: cfg} }

// Create returns a new producer: the one of a creation still under way, or a new one.
// When ctx ends first it returns a txproducer.Indefinite error; the creation goes on, and the next
// Create (or Close) takes its result.
func (c *Creator) Create(ctx context.Context) (*Producer, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &txproducer.Error{Op: "init " + c.cfg.TransactionalID, Class: txproducer.Fatal, Err: errCreatorClosed}
	}
	ch := c.pending
	if ch == nil {
		ch = make(chan created, 1)
		c.pending = ch
		go func() {
			p, err := newProducer(c.cfg)
			ch <- created{p, err}
		}()
	}
	c.mu.Unlock()
	select {
	case r := <-ch:
		c.mu.Lock()
		c.pending = nil
		c.mu.Unlock()
		return r.p, r.err
	case <-ctx.Done():
		return nil, &txproducer.Error{Op: "init " + c.cfg.TransactionalID, Class: txproducer.Indefinite, Err: fmt.Errorf("%w (the creation goes on; the next one takes it)", ctx.Err())}
	}
}

var errCreatorClosed = errors.New("producer creator closed")

// Close ends the Creator: a producer a creation under way makes is closed when it
// arrives, and Create fails from now on.
func (c *Creator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if ch := c.pending; ch != nil {
		c.pending = nil
		go func() { // ends when the creation does
			if r := <-ch; r.p != nil {
				_ = r.p.Close()
			}
		}()
	}
}

func newProducer(cfg Config) (*Producer, error) {
	sc := SaramaConfig(cfg.Sarama, cfg.TransactionalID, cfg.TransactionTimeout)
	p := &Producer{txnID: cfg.TransactionalID, offsets: map[topicPartition]int64{}, unsettled: map[topicPartition]int{}, drained: make(chan struct{})}
	p.idle = make(chan struct{})
	close(p.idle)
	var err error
	if cfg.TransactionalID == "" && cfg.Client != nil {
		p.client = cfg.Client
	} else {
		p.client, err = sarama.NewClient(cfg.Brokers, sc)
		if err != nil {
			return nil, &txproducer.Error{Op: "connect", Class: txproducer.Indefinite, Err: err}
		}
		p.own = true
	}
	p.ap, err = sarama.NewAsyncProducerFromClient(p.client)
	if err != nil {
		if p.own {
			_ = p.client.Close()
		}
		if errors.Is(err, sarama.ErrInvalidTransactionTimeout) {
			// The broker refuses a timeout above its transaction.max.timeout.ms (or
			// not positive); every retry is refused the same (issue 26: it was
			// retried every 5 s for ever as an unknown outcome).
			return nil, &txproducer.Error{Op: "init " + cfg.TransactionalID, Class: txproducer.Fatal,
				Err: fmt.Errorf("Config.TransactionTimeout %v is refused by the broker, which allows at most its transaction.max.timeout.ms (default 15 min): lower Config.TransactionTimeout or raise the broker's setting: %w", cfg.TransactionTimeout, kafkaerr.Explain(err))}
		}
		return nil, classify("init "+cfg.TransactionalID, err, 0)
	}
	go p.drain()
	return p, nil
}

// drain takes acknowledgements and errors until the producer closes.
func (p *Producer) drain() {
	defer close(p.drained)
	succ, errs := p.ap.Successes(), p.ap.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			p.mu.Lock()
			tp := topicPartition{m.Topic, m.Partition}
			if old, ok := p.offsets[tp]; !ok || m.Offset > old {
				p.offsets[tp] = m.Offset
			}
			p.settle(m)
			p.done()
			p.mu.Unlock()
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			p.mu.Lock()
			err := e.Err
			if e.Msg != nil {
				err = recordError(e.Msg, e.Err)
				p.settle(e.Msg)
			}
			p.errs = append(p.errs, err)
			p.done()
			p.mu.Unlock()
		}
	}
}

// settle takes a record sent with a batch limit off its partition's unsettled bytes;
// p.mu is held.
func (p *Producer) settle(m *sarama.ProducerMessage) {
	if s, ok := m.Metadata.(*sent); ok && s.bytes > 0 {
		tp := topicPartition{m.Topic, m.Partition}
		if p.unsettled[tp] -= s.bytes; p.unsettled[tp] <= 0 {
			delete(p.unsettled, tp)
		}
	}
}

// done marks one record settled; p.mu is held.
func (p *Producer) done() {
	p.pending--
	if p.pending == 0 {
		close(p.idle)
	}
}

// TransactionalID is the producer's transactional ID ("" when not transactional).
func (p *Producer) TransactionalID() string { return p.txnID }

// Transactional reports whether the producer runs transactions.
func (p *Producer) Transactional() bool { return p.txnID != "" }

// Begin starts a transaction unless one is open.
func (p *Producer) Begin() error {
	if p.unknown != nil {
		return p.unknown
	}
	if !p.Transactional() || p.ap.TxnStatus()&sarama.ProducerTxnFlagInTransaction != 0 {
		return nil
	}
	if err := p.ap.BeginTxn(); err != nil {
		// BeginTxn fails with "invalid transition" when the transaction manager is in an
		// error state; the cause (a fenced epoch, say) is an earlier record's error,
		// which the caller must see to know what to do.
		p.mu.Lock()
		causes := p.errs
		p.errs = nil
		p.mu.Unlock()
		return classify("begin", errors.Join(append([]error{err}, causes...)...), p.ap.TxnStatus())
	}
	p.began = time.Now()
	return nil
}

// InTransaction reports whether a transaction is open.
func (p *Producer) InTransaction() bool {
	return p.Transactional() && p.ap.TxnStatus()&sarama.ProducerTxnFlagInTransaction != 0
}

// Send queues a record, beginning a transaction first if none is open. Its outcome is
// known at Flush.
func (p *Producer) Send(ctx context.Context, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader, ts time.Time) error {
	return p.SendFrom(ctx, nil, topic, partition, key, value, headers, ts)
}

// SendFrom is Send for a record that the input record origin caused: a failure of the
// record names it (RecordError).
func (p *Producer) SendFrom(ctx context.Context, origin *Origin, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader, ts time.Time) error {
	return p.SendWithin(ctx, 0, origin, topic, partition, key, value, headers, ts)
}

// SendWithin is SendFrom for a topic whose partitions take record batches of at most
// batchLimit bytes (its max.message.bytes; 0: no limit known). sarama batches the
// records of a partition up to Producer.MaxMessageBytes, one setting for every topic
// (1 MB by default): records that each fit a topic with a smaller limit went out in a
// batch it refused (MESSAGE_TOO_LARGE), which stopped the application (issue 26; the
// Java producer splits such a batch and sends it again, sarama does not). So a record
// that would take the partition's unsettled records over the limit waits until they
// are settled, and no batch sarama makes can exceed it. A record larger than the limit
// alone is the caller's to refuse (RecordBatchSize); sent, it goes alone.
func (p *Producer) SendWithin(ctx context.Context, batchLimit int, origin *Origin, topic string, partition int32, key, value []byte, headers []sarama.RecordHeader, ts time.Time) error {
	if err := p.Begin(); err != nil {
		return err
	}
	msg := &sarama.ProducerMessage{Topic: topic, Partition: partition, Headers: headers, Timestamp: ts}
	meta := &sent{origin: origin}
	msg.Metadata = meta
	if batchLimit > 0 {
		meta.bytes = RecordBatchSize(key, value, headers) - recordBatchOverhead + recordDeltasMax
		tp := topicPartition{topic, partition}
		for {
			p.mu.Lock()
			pending, idle := p.unsettled[tp], p.idle
			if pending == 0 || recordBatchOverhead+pending+meta.bytes <= batchLimit {
				p.unsettled[tp] = pending + meta.bytes
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			select {
			case <-idle:
			case <-ctx.Done():
				return &txproducer.Error{Op: "send", Class: txproducer.Indefinite, Err: ctx.Err()}
			}
		}
	}
	if key != nil {
		msg.Key = sarama.ByteEncoder(key)
	}
	if value != nil {
		msg.Value = sarama.ByteEncoder(value)
	}
	p.mu.Lock()
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	p.mu.Unlock()
	select {
	case p.ap.Input() <- msg:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.done()
		p.mu.Unlock()
		return &txproducer.Error{Op: "send", Class: txproducer.Indefinite, Err: ctx.Err()}
	}
}

// Flush waits until every sent record is acknowledged or failed, and returns the first
// failure, classified.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		return &txproducer.Error{Op: "flush", Class: txproducer.Indefinite, Err: ctx.Err()}
	}
	p.mu.Lock()
	errs := p.errs
	p.errs = nil
	p.mu.Unlock()
	if len(errs) > 0 {
		return classify("send", errors.Join(errs...), p.ap.TxnStatus())
	}
	return nil
}

// Offset returns the highest acknowledged offset written to a partition, and whether the
// producer wrote there at all.
func (p *Producer) Offset(topic string, partition int32) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ok := p.offsets[topicPartition{topic, partition}]
	return off, ok
}

// Commit flushes, adds the consumed offsets (next offset to read, per topic and
// partition) to the transaction for the group described by meta, and commits. With no
// open transaction and no offsets it does nothing.
func (p *Producer) Commit(ctx context.Context, offsets map[string]map[int32]int64, meta *sarama.ConsumerGroupMetadata) error {
	if !p.Transactional() {
		return errors.New("producer: Commit on a non-transactional producer")
	}
	if p.unknown != nil {
		return p.unknown
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	if len(offsets) > 0 {
		if err := p.Begin(); err != nil {
			return err
		}
		req := make(map[string][]*sarama.PartitionOffsetMetadata, len(offsets))
		for topic, parts := range offsets {
			for part, off := range parts {
				req[topic] = append(req[topic], &sarama.PartitionOffsetMetadata{Partition: part, Offset: off, LeaderEpoch: -1})
			}
		}
		if err := p.bounded(ctx, "add offsets", func() error { return p.ap.AddOffsetsToTxnWithGroupMetadata(req, meta) }); err != nil {
			return err
		}
	}
	if !p.InTransaction() {
		return nil
	}
	if err := p.bounded(ctx, "commit", p.ap.CommitTxn); err != nil {
		return err
	}
	p.began = time.Time{}
	return nil
}

// Abort aborts the open transaction, if any, after the in-flight records settled.
func (p *Producer) Abort(ctx context.Context) error {
	if p.unknown != nil {
		return p.unknown
	}
	_ = p.Flush(ctx) // their errors are what we abort for
	if !p.InTransaction() && p.ap.TxnStatus()&sarama.ProducerTxnFlagAbortableError == 0 {
		return nil
	}
	if err := p.bounded(ctx, "abort", p.ap.AbortTxn); err != nil {
		return err
	}
	p.began = time.Time{}
	return nil
}

// OpenFor is how long the transaction begun last has been open, up to now; 0 when none
// was begun since the last commit or abort that succeeded. A transaction that failed
// keeps its age: the worker tells, from it, a transaction the broker aborted for
// outliving its timeout from one fenced by another producer.
func (p *Producer) OpenFor(now time.Time) time.Duration {
	if p.began.IsZero() {
		return 0
	}
	return now.Sub(p.began)
}

// bounded runs one of sarama's transaction calls (AddOffsetsToTxn, CommitTxn,
// AbortTxn), bounded by ctx. They take no context: each retries up to Transaction.Retry.Max times, each request waiting up to
// Net.ReadTimeout, which can block a commit at suspend, Cleanup or an abandon for
// minutes while the group's heartbeats wait. When ctx ends first, the call goes on in the
// background (it ends once Close closes the client) and the outcome is unknown: the
// error is txproducer.Indefinite, the producer refuses every later call, and the task recreates it,
// which settles the transaction one way or the other.
func (p *Producer) bounded(ctx context.Context, op string, call func() error) error {
	done := make(chan error, 1)
	p.callMu.Lock()
	p.calling = true
	p.callMu.Unlock()
	go func() {
		err := call()
		p.callMu.Lock()
		p.calling = false
		closeNow := p.closeAfterCall
		p.callMu.Unlock()
		done <- err
		if closeNow {
			_ = p.shutdown()
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			return classify(op, err, p.ap.TxnStatus())
		}
		return nil
	case <-ctx.Done():
		p.unknown = &txproducer.Error{Op: op, Class: txproducer.Indefinite, Err: fmt.Errorf("outcome unknown: %w", ctx.Err())}
		return p.unknown
	}
}

// Close closes the producer (and its client, when it made one). An open transaction is
// left to be aborted by the next producer of the task or by the transaction timeout.
// When a commit or abort that outlived its context still runs, Close returns at once and
// the producer closes when that call ends (sarama's retries bound it).
func (p *Producer) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.callMu.Lock()
	if p.calling {
		p.closeAfterCall = true
		p.callMu.Unlock()
		return nil
	}
	p.callMu.Unlock()
	return p.shutdown()
}

func (p *Producer) shutdown() error {
	err := p.ap.Close()
	<-p.drained
	if p.own {
		err = errors.Join(err, p.client.Close())
	}
	return err
}

// Classify sorts a producer error into what the task must do. status is the producer's
// transaction status after the error.
func classify(op string, err error, status sarama.ProducerTxnStatusFlag) error {
	var pe *txproducer.Error
	if errors.As(err, &pe) {
		return err
	}
	return &txproducer.Error{Op: op, Class: Classify(err, status), Err: kafkaerr.Explain(err)}
}

// errTransactionAbortable is TRANSACTION_ABORTABLE (KIP-890, Kafka 3.8+): the broker
// says the transaction can be aborted and the transactional ID used again. sarama
// v1.61.1 has no constant for it and does not flag the transaction abortable.
const errTransactionAbortable = sarama.KError(120)

// Classify sorts an error into a txproducer.Class, looking at the Kafka error codes it wraps and at
// the producer's transaction status.
func Classify(err error, status sarama.ProducerTxnStatusFlag) txproducer.Class {
	var pe *txproducer.Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	switch {
	case errors.Is(err, sarama.ErrProducerFenced), errors.Is(err, sarama.ErrInvalidProducerEpoch),
		errors.Is(err, sarama.ErrInvalidProducerIDMapping), errors.Is(err, sarama.ErrFencedInstancedId),
		errors.Is(err, sarama.ErrIllegalGeneration), errors.Is(err, sarama.ErrUnknownMemberId):
		return txproducer.Fenced
	case errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed), errors.Is(err, sarama.ErrClusterAuthorizationFailed),
		errors.Is(err, sarama.ErrTopicAuthorizationFailed), errors.Is(err, sarama.ErrGroupAuthorizationFailed),
		errors.Is(err, sarama.ErrUnsupportedVersion), errors.Is(err, sarama.ErrUnsupportedForMessageFormat):
		return txproducer.Fatal
	case Permanent(err):
		// The same record fails again after the abort and the replay: aborting and
		// replaying it looped for ever (issue 26, 174 rollbacks in 30 s). It ends the
		// application, which names the record (the runtime's OutputRecordError).
		return txproducer.Fatal
	case status&sarama.ProducerTxnFlagAbortableError != 0, errors.Is(err, errTransactionAbortable):
		return txproducer.Abortable
	}
	return txproducer.Indefinite
}
