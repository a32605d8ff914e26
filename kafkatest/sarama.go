package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// NewSaramaConfig returns a sarama configuration that works against both the
// embedded broker and Apache Kafka 4.1, as the package's helpers use it:
//
//   - Version sarama.V4_0_0_0. sarama clamps every request to the versions a
//     broker advertises (ApiVersions), so Version is the client's ceiling;
//     4.0 turns on every code path Kafka 4.x needs (KIP-447 TxnOffsetCommit
//     v3, PRODUCER_FENCED, InitProducerId epoch bumps). Kafka 4.x removed
//     the protocol versions before 2.1; never go below V2_5_0_0 for
//     transactions.
//   - short retry backoffs and timeouts for tests.
//
// Each call returns a new configuration; change it freely.
func NewSaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "eddy-kafkatest"
	cfg.Version = sarama.V4_0_0_0
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Admin.Timeout = 30 * time.Second
	cfg.Admin.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	return cfg
}

// endpoint is where the helpers connect: the bootstrap addresses and an adjustment of
// the sarama configuration (TLS and SASL of a secured cluster).
type endpoint struct {
	list   []string
	adjust func(*sarama.Config) error
}

// String prints the addresses, as the helpers' errors name them.
func (e endpoint) String() string { return fmt.Sprint(e.list) }

// config is NewSaramaConfig with the adjustment applied.
func (e endpoint) config() (*sarama.Config, error) {
	cfg := NewSaramaConfig()
	if e.adjust != nil {
		if err := e.adjust(cfg); err != nil {
			return nil, fmt.Errorf("kafkatest: adjust the sarama configuration: %w", err)
		}
	}
	return cfg, nil
}

// withClient runs fn with a sarama client of addrs, closing it afterwards.
// fn runs in its own goroutine: when ctx ends first, withClient closes the
// client (which fails fn's pending calls) and returns ctx's error.
func withClient(ctx context.Context, addrs endpoint, fn func(sarama.Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := addrs.config()
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 && d < cfg.Admin.Timeout {
			cfg.Admin.Timeout = d
		}
	}
	client, err := sarama.NewClient(addrs.list, cfg)
	if err != nil {
		return fmt.Errorf("connecting to %v: %w", addrs, err)
	}
	done := make(chan error, 1)
	go func() { done <- fn(client) }()
	select {
	case err = <-done:
		if cerr := client.Close(); cerr != nil && err == nil && !errors.Is(cerr, sarama.ErrClosedClient) {
			err = fmt.Errorf("closing the client of %v: %w", addrs, cerr)
		}
		return err
	case <-ctx.Done():
		_ = client.Close()
		<-done
		return ctx.Err()
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func createTopic(ctx context.Context, addrs endpoint, name string, partitions int32, configs map[string]string) error {
	if partitions < 1 {
		return fmt.Errorf("kafkatest: create topic %q: partitions must be at least 1, got %d", name, partitions)
	}
	err := withClient(ctx, addrs, func(client sarama.Client) error {
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			return err
		}
		detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: -1}
		if len(configs) > 0 {
			detail.ConfigEntries = make(map[string]*string, len(configs))
			for k, v := range configs {
				detail.ConfigEntries[k] = &v
			}
		}
		if err := admin.CreateTopic(name, detail, false); err != nil {
			return err
		}
		// Wait until the metadata shows every partition with a leader.
		for {
			if err := client.RefreshMetadata(name); err == nil {
				if ps, err := client.Partitions(name); err == nil && int32(len(ps)) == partitions {
					ready := true
					for _, p := range ps {
						if _, err := client.Leader(name, p); err != nil {
							ready = false
							break
						}
					}
					if ready {
						return nil
					}
				}
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for its partitions to get leaders: %w", err)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("kafkatest: create topic %q (%d partitions) on %v: %w", name, partitions, addrs, err)
	}
	// The metadata can name a leader before that broker serves the partition: Kafka
	// 4.1.1 answered a transactional produce NOT_LEADER_OR_FOLLOWER right after
	// (TestReadCommittedSmallResponseLimit failed so once). ListOffsets at the leader,
	// retried on that error, waits until it does.
	if _, err := endOffsets(ctx, addrs, name, sarama.ReadUncommitted); err != nil {
		return fmt.Errorf("kafkatest: create topic %q: waiting for its leaders to serve it: %w", name, err)
	}
	return nil
}

// partitions returns the partition IDs of topic, sorted.
func partitionsOf(client sarama.Client, topic string) ([]int32, error) {
	if err := client.RefreshMetadata(topic); err != nil {
		return nil, err
	}
	return client.Partitions(topic)
}

func endOffsets(ctx context.Context, addrs endpoint, topic string, isolation sarama.IsolationLevel) (map[int32]int64, error) {
	var out map[int32]int64
	err := withClient(ctx, addrs, func(client sarama.Client) error {
		var err error
		out, err = listOffsets(client, topic, sarama.OffsetNewest, isolation)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kafkatest: end offsets of %q (%s) on %v: %w", topic, isolationName(isolation), addrs, err)
	}
	return out, nil
}

// listOffsets asks, for every partition of topic, for the offset at query
// (sarama.OffsetNewest or sarama.OffsetOldest) under isolation.
//
// Right after a topic is created, a real broker can answer NOT_LEADER_OR_FOLLOWER
// (or LEADER_NOT_AVAILABLE) for a moment: its own metadata has not caught up (seen
// in CI 0.6 s after a test created its topic). Such answers are retried with
// fresh metadata for a few seconds, as a Kafka client does.
func listOffsets(client sarama.Client, topic string, query int64, isolation sarama.IsolationLevel) (map[int32]int64, error) {
	var lastErr error
	for attempt := range listOffsetsAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		out, err := listOffsetsOnce(client, topic, query, isolation)
		if err == nil || !transient(err) {
			return out, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w (still after %d attempts)", lastErr, listOffsetsAttempts)
}

// listOffsetsAttempts bounds listOffsets' retries: 10 attempts wait 4.5 s in all.
const listOffsetsAttempts = 10

// transient reports whether err is a broker answer that a retry with fresh
// metadata can cure.
func transient(err error) bool {
	for _, e := range []error{
		errLeaderBehind, sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrOffsetNotAvailable,
		sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch, sarama.ErrRequestTimedOut,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// errLeaderBehind marks an UNKNOWN_TOPIC_OR_PARTITION answer from the leader the
// metadata named for a partition: on a cluster of several brokers the leader can
// learn of a topic after the broker that answered the metadata request (seen on
// three-node Kafka 4.1.1 right after a topic was created). The Java client retries it.
var errLeaderBehind = errors.New("the partition's leader does not know it yet")

func listOffsetsOnce(client sarama.Client, topic string, query int64, isolation sarama.IsolationLevel) (map[int32]int64, error) {
	ps, err := partitionsOf(client, topic)
	if err != nil {
		return nil, err
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, err
	}
	req := map[string]map[int32]int64{topic: {}}
	for _, p := range ps {
		req[topic][p] = query
	}
	res, err := admin.ListOffsets(req, &sarama.ListOffsetsOptions{IsolationLevel: isolation})
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(ps))
	for _, p := range ps {
		r := res[topic][p]
		if r == nil {
			return nil, fmt.Errorf("partition %d: no result", p)
		}
		if errors.Is(r.Err, sarama.ErrUnknownTopicOrPartition) {
			return nil, fmt.Errorf("partition %d: %w: %w", p, errLeaderBehind, r.Err)
		}
		if r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError) {
			return nil, fmt.Errorf("partition %d: %w", p, r.Err)
		}
		out[p] = r.Offset
	}
	return out, nil
}

func committedOffsets(ctx context.Context, addrs endpoint, group, topic string) (map[int32]int64, error) {
	var out map[int32]int64
	err := withClient(ctx, addrs, func(client sarama.Client) error {
		ps, err := partitionsOf(client, topic)
		if err != nil {
			return err
		}
		for {
			var retry error
			out, retry, err = fetchStableOffsets(client, group, topic, ps)
			if err != nil {
				return err
			}
			if retry == nil {
				return nil
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("%w (last answer: %w)", err, retry)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("kafkatest: committed offsets of group %q on %q on %v: %w", group, topic, addrs, err)
	}
	return out, nil
}

// fetchStableOffsets sends one OffsetFetch with RequireStable (KIP-447),
// as a read_committed group member does: while a committed transaction's
// offsets are not yet materialised (Kafka writes the commit markers after
// EndTxn has answered), the coordinator answers UNSTABLE_OFFSET_COMMIT. Such
// retriable answers come back as retry; other failures as err.
func fetchStableOffsets(client sarama.Client, group, topic string, ps []int32) (out map[int32]int64, retry, err error) {
	coordinator, err := client.Coordinator(group)
	if err != nil {
		_ = client.RefreshCoordinator(group)
		return nil, err, nil
	}
	req := sarama.NewOffsetFetchRequest(client.Config().Version, group, map[string][]int32{topic: ps})
	req.RequireStable = true
	resp, err := coordinator.FetchOffset(req)
	if err != nil {
		_ = client.RefreshCoordinator(group)
		return nil, err, nil
	}
	retriable := func(e sarama.KError) bool {
		switch e {
		case sarama.ErrUnstableOffsetCommit, sarama.ErrOffsetsLoadInProgress,
			sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable:
			if e != sarama.ErrUnstableOffsetCommit && e != sarama.ErrOffsetsLoadInProgress {
				_ = client.RefreshCoordinator(group)
			}
			return true
		}
		return false
	}
	if e := resp.GroupError(); e != sarama.ErrNoError {
		if retriable(e) {
			return nil, e, nil
		}
		return nil, nil, e
	}
	out = make(map[int32]int64, len(ps))
	for _, p := range ps {
		b := resp.GetBlock(topic, p)
		if b == nil {
			return nil, nil, fmt.Errorf("partition %d: no result", p)
		}
		if b.Err != sarama.ErrNoError {
			if retriable(b.Err) {
				return nil, b.Err, nil
			}
			return nil, nil, fmt.Errorf("partition %d: %w", p, b.Err)
		}
		out[p] = b.Offset
	}
	return out, nil, nil
}

func produceTxn(ctx context.Context, addrs endpoint, txnID string, commit bool, msgs []*sarama.ProducerMessage) (err error) {
	cfg, err := addrs.config()
	if err != nil {
		return err
	}
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addrs.list, cfg)
	if err != nil {
		return fmt.Errorf("kafkatest: transactional producer %q: connecting to %v: %w", txnID, addrs, err)
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("kafkatest: begin a transaction of %q: %w", txnID, err)
	}
	if err := p.SendMessages(msgs); err != nil {
		return fmt.Errorf("kafkatest: send in a transaction of %q: %w", txnID, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if commit {
		err = p.CommitTxn()
	} else {
		err = p.AbortTxn()
	}
	if err != nil {
		return fmt.Errorf("kafkatest: end a transaction of %q (commit %v): %w", txnID, commit, err)
	}
	return nil
}

func produce(ctx context.Context, addrs endpoint, topic string, partition int32, msgs []*sarama.ProducerMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := addrs.config()
	if err != nil {
		return err
	}
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	if partition >= 0 {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	} else {
		cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
	}
	for _, m := range msgs {
		m.Topic = topic
		if partition >= 0 {
			m.Partition = partition
		}
	}
	// An AsyncProducer fed and drained by this goroutine alone: when ctx ends, nothing
	// else still sends to it, so it can be closed (closing a SyncProducer while its
	// SendMessages still feeds it panics in sarama: send on closed channel).
	p, err := sarama.NewAsyncProducer(addrs.list, cfg)
	if err != nil {
		return fmt.Errorf("kafkatest: produce to %q: connecting to %v: %w", topic, addrs, err)
	}
	var errs []error
	pending, answered := msgs, 0
	for answered < len(msgs) && err == nil {
		var in chan<- *sarama.ProducerMessage // nil, so never ready, once all are sent
		var next *sarama.ProducerMessage
		if len(pending) > 0 {
			in, next = p.Input(), pending[0]
		}
		select {
		case in <- next:
			pending = pending[1:]
		case <-p.Successes():
			answered++
		case perr := <-p.Errors():
			errs = append(errs, perr)
			answered++
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	// Close waits for the messages in flight and returns the errors not read yet.
	if cerr := p.Close(); cerr != nil {
		errs = append(errs, cerr)
	}
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return fmt.Errorf("kafkatest: produce %d records to %q on %v: %w", len(msgs), topic, addrs, err)
	}
	return nil
}

func isolationName(l sarama.IsolationLevel) string {
	if l == sarama.ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}
