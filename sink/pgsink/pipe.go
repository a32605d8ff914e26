package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
)

// PipeConfig configures a Pipe.
type PipeConfig[K, V any] struct {
	// App names the pipe: its Kafka consumer group (which only assigns partitions: no
	// offset is committed to Kafka) and its rows in the offsets table. Letters, digits,
	// '.', '_' and '-'.
	App     string
	Brokers []string
	Topic   string
	// Key and Value decode the records (serde.String(), serde.JSON[T](), …).
	Key   serde.Deserializer[K]
	Value serde.Deserializer[V]
	Pool  *pgxpool.Pool
	// Table maps a record to its row. With Key columns a record replaces its key's row;
	// without, each record adds one (COPY).
	Table Table[K, V]
	// Offsets is the table of the next offset per (app, topic, partition), created if
	// missing. Default eddy_sink_offsets.
	Offsets string
	// Sarama is a base client configuration (TLS, SASL, version); nil: sarama's
	// defaults. The pipe sets read_committed, manual partition offsets and no offset
	// commits on a copy.
	Sarama *sarama.Config
	// BatchRecords bounds a batch (one PostgreSQL transaction); default 5000.
	// BatchWait is how long a batch waits for more records after its first; default
	// 100 ms.
	BatchRecords int
	BatchWait    time.Duration
	// Logger: default slog.Default().
	Logger *slog.Logger
}

const defaultOffsetsTable = "eddy_sink_offsets"

// Pipe is a sink application (the write-ahead mode): it reads Topic with
// read_committed and writes each batch of records together with its partition's next
// offset in one PostgreSQL transaction. Each partition starts from the offset stored in
// PostgreSQL, never from Kafka's committed offsets, so a record's row is written once
// whatever crashes. A partition's previous owner (a consumer that lost it in a
// rebalance but still writes) is fenced by the offsets row: a batch commits only if
// the row still holds the offset the batch started from; otherwise it is rolled back
// and the pipe gives the partition up until the next rebalance.
type Pipe[K, V any] struct {
	cfg     PipeConfig[K, V]
	tb      *table[K, V]
	offsets pgx.Identifier
	log     *slog.Logger
}

// NewPipe checks the configuration and the table and creates the offsets table if
// missing.
func NewPipe[K, V any](ctx context.Context, cfg PipeConfig[K, V]) (*Pipe[K, V], error) {
	if err := sinktxn.CheckName("pipe App", cfg.App); err != nil {
		return nil, fmt.Errorf("pgsink: %w", err)
	}
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("pgsink: pipe: no Brokers")
	case cfg.Topic == "":
		return nil, errors.New("pgsink: pipe: no Topic")
	case cfg.Key == nil || cfg.Value == nil:
		return nil, errors.New("pgsink: pipe: Key and Value deserializers are needed")
	case cfg.Pool == nil:
		return nil, errors.New("pgsink: pipe: no Pool")
	}
	if cfg.Offsets == "" {
		cfg.Offsets = defaultOffsetsTable
	}
	if cfg.BatchRecords <= 0 {
		cfg.BatchRecords = 5000
	}
	if cfg.BatchWait <= 0 {
		cfg.BatchWait = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tb, err := openTable(ctx, cfg.Pool, cfg.Table, false)
	if err != nil {
		return nil, err
	}
	p := &Pipe[K, V]{cfg: cfg, tb: tb, offsets: identOf(cfg.Offsets),
		log: cfg.Logger.With("pipe", cfg.App, "topic", cfg.Topic)}
	var exists bool
	if err := cfg.Pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", p.offsets.Sanitize()).Scan(&exists); err != nil {
		return nil, dbErr("look up the offsets table "+cfg.Offsets, err)
	}
	if !exists {
		_, err := cfg.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (app text NOT NULL, topic text NOT NULL, partition integer NOT NULL,
			next_offset bigint NOT NULL, PRIMARY KEY (app, topic, partition))`, p.offsets.Sanitize()))
		if err != nil && !createdMeanwhile(ctx, cfg.Pool, p.offsets) {
			return nil, dbErr("create the offsets table "+cfg.Offsets, err)
		}
	}
	return p, nil
}

// Run consumes until ctx ends (nil) or a failure that a retry cannot get past: a
// record the table refuses, one that does not decode, a refused login (the error names
// it; nothing is skipped: the offsets stay before the record). The database down is
// retried with backoff.
func (p *Pipe[K, V]) Run(ctx context.Context) error {
	sc := sarama.NewConfig()
	if p.cfg.Sarama != nil {
		c := *p.cfg.Sarama
		sc = &c
	}
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	sc.Consumer.Offsets.AutoCommit.Enable = false
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Return.Errors = true
	if !sc.Version.IsAtLeast(sarama.V0_11_0_0) {
		sc.Version = sarama.V2_1_0_0
	}
	client, err := sarama.NewClient(p.cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("pgsink: pipe %s: connect to Kafka: %w", p.cfg.App, err)
	}
	defer client.Close()
	group, err := sarama.NewConsumerGroupFromClient(p.cfg.App, client)
	if err != nil {
		return fmt.Errorf("pgsink: pipe %s: consumer group: %w", p.cfg.App, err)
	}
	defer group.Close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h := &pipeHandler[K, V]{p: p, client: client, fail: cancel}
	go func() {
		for err := range group.Errors() {
			p.log.Warn("consumer group error", "error", err)
		}
	}()
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{p.cfg.Topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) || ctx.Err() != nil {
				break
			}
			p.log.Warn("consume failed; retrying", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// errFenced: the offsets row moved past the batch's start: another owner wrote it.
var errFenced = errors.New("the partition's offsets row no longer holds the batch's start offset: another consumer owns the partition")

type pipeHandler[K, V any] struct {
	p      *Pipe[K, V]
	client sarama.Client
	fail   context.CancelCauseFunc
	mu     sync.Mutex
	start  map[int32]int64 // the offsets row's value at the claim's start (-1: no row yet)
}

// Setup reads each claimed partition's next offset from PostgreSQL and points the
// claim there (MarkOffset moves sarama's offset up to it, ResetOffset down to it).
func (h *pipeHandler[K, V]) Setup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start = map[int32]int64{}
	ctx := sess.Context()
	for _, part := range sess.Claims()[h.p.cfg.Topic] {
		next, err := h.p.readOffset(ctx, part)
		if err != nil {
			return err
		}
		h.start[part] = next
		pos := next
		if pos < 0 {
			if pos, err = h.client.GetOffset(h.p.cfg.Topic, part, sarama.OffsetOldest); err != nil {
				return fmt.Errorf("pgsink: pipe %s: log start of %s/%d: %w", h.p.cfg.App, h.p.cfg.Topic, part, err)
			}
		}
		sess.MarkOffset(h.p.cfg.Topic, part, pos, "")
		sess.ResetOffset(h.p.cfg.Topic, part, pos, "")
	}
	return nil
}

func (h *pipeHandler[K, V]) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// readOffset returns the partition's stored next offset, -1 when none.
func (p *Pipe[K, V]) readOffset(ctx context.Context, part int32) (int64, error) {
	var next int64
	err := p.cfg.Pool.QueryRow(ctx, fmt.Sprintf("SELECT next_offset FROM %s WHERE app = $1 AND topic = $2 AND partition = $3", p.offsets.Sanitize()),
		p.cfg.App, p.cfg.Topic, part).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, dbErr(fmt.Sprintf("read the next offset of %s/%d", p.cfg.Topic, part), err)
	}
	return next, nil
}

func (h *pipeHandler[K, V]) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	part := claim.Partition()
	h.mu.Lock()
	expected, ok := h.start[part]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	ctx := sess.Context()
	log := h.p.log.With("partition", part)
	var batch []*sarama.ConsumerMessage
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		}
		timer := time.NewTimer(h.p.cfg.BatchWait)
	fill:
		for len(batch) < h.p.cfg.BatchRecords {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				batch = append(batch, m)
			case <-timer.C:
				break fill
			case <-ctx.Done():
				timer.Stop()
				return nil
			}
		}
		timer.Stop()
		next, err := h.p.writeRetrying(ctx, log, part, expected, batch)
		switch {
		case errors.Is(err, errFenced):
			log.Warn("fenced: another consumer wrote this partition; giving it up until the next rebalance", "batch_start", expected)
			return nil
		case ctx.Err() != nil:
			return nil
		case err != nil:
			h.fail(err)
			return err
		}
		expected = next
	}
}

// writeRetrying writes a batch, retrying with backoff while the error is retriable and
// the session lasts.
func (p *Pipe[K, V]) writeRetrying(ctx context.Context, log *slog.Logger, part int32, expected int64, batch []*sarama.ConsumerMessage) (int64, error) {
	delay := 100 * time.Millisecond
	for {
		next, err := p.writeBatch(ctx, part, expected, batch)
		if errors.Is(err, errFenced) {
			// The row moved: by another owner, or by this batch's own commit whose
			// answer was lost (a retry after a connection died in COMMIT). Moved to
			// exactly this batch's end, it holds these records' rows either way.
			end := batch[len(batch)-1].Offset + 1
			if stored, rerr := p.readOffset(ctx, part); rerr == nil && stored == end {
				return end, nil
			}
			return 0, err
		}
		if err == nil || !Retriable(err) || ctx.Err() != nil {
			return next, err
		}
		log.Warn("writing a batch failed; retrying", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// writeBatch writes the batch's rows and moves the partition's offsets row from
// expected (the batch's start, -1: no row yet) to the batch's next offset, in one
// transaction; errFenced when the row holds another offset.
func (p *Pipe[K, V]) writeBatch(ctx context.Context, part int32, expected int64, batch []*sarama.ConsumerMessage) (int64, error) {
	rows := make([]row, 0, len(batch))
	for _, m := range batch {
		k, err := p.cfg.Key.Deserialize(m.Topic, m.Key)
		if err != nil {
			return 0, fmt.Errorf("pgsink: pipe %s: decode the key of topic %s partition %d offset %d: %w", p.cfg.App, m.Topic, m.Partition, m.Offset, err)
		}
		v, err := p.cfg.Value.Deserialize(m.Topic, m.Value)
		if err != nil {
			return 0, fmt.Errorf("pgsink: pipe %s: decode the value of topic %s partition %d offset %d: %w", p.cfg.App, m.Topic, m.Partition, m.Offset, err)
		}
		r, err := p.tb.mapRow(sink.Record[K, V]{Key: k, Value: v, Timestamp: m.Timestamp, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
		if err != nil {
			return 0, err
		}
		rows = append(rows, r)
	}
	next := batch[len(batch)-1].Offset + 1
	tx, err := p.cfg.Pool.Begin(ctx)
	if err != nil {
		return 0, dbErr("begin a batch's transaction", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var tag interface{ RowsAffected() int64 }
	if expected < 0 {
		tag, err = tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (app, topic, partition, next_offset) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", p.offsets.Sanitize()),
			p.cfg.App, p.cfg.Topic, part, next)
	} else {
		tag, err = tx.Exec(ctx, fmt.Sprintf("UPDATE %s SET next_offset = $4 WHERE app = $1 AND topic = $2 AND partition = $3 AND next_offset = $5", p.offsets.Sanitize()),
			p.cfg.App, p.cfg.Topic, part, next, expected)
	}
	if err != nil {
		return 0, dbErr(fmt.Sprintf("move the next offset of %s/%d to %d", p.cfg.Topic, part, next), err)
	}
	// The offsets row first: a fenced batch writes nothing, and the row lock orders two
	// owners of the partition (the second waits for the first's commit and then sees
	// the row moved).
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("pgsink: pipe %s: %s/%d from offset %d: %w", p.cfg.App, p.cfg.Topic, part, expected, errFenced)
	}
	if err := p.tb.write(ctx, tx, rows); err != nil {
		return 0, fmt.Errorf("pgsink: pipe %s: %w", p.cfg.App, p.tb.writeErr(ctx, p.cfg.Pool, rows, err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbErr(fmt.Sprintf("commit the batch of %s/%d up to offset %d", p.cfg.Topic, part, next), err)
	}
	return next, nil
}
