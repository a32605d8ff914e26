package kafkatest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// BrokersEnv names the environment variable that points the tests at a real
// Kafka cluster: a comma-separated list of bootstrap addresses, for example
// "127.0.0.1:19092" (what integration/kafka.sh start prints).
const BrokersEnv = "EDDY_TEST_BROKERS"

// Names of the clusters [ForEachCluster] runs against; they are also the
// subtest names.
const (
	EmbeddedName = "embedded"
	KafkaName    = "kafka"
)

// BrokersFromEnv returns the addresses in EDDY_TEST_BROKERS, or nil when it
// is unset or empty.
func BrokersFromEnv() []string {
	var addrs []string
	for _, a := range strings.Split(os.Getenv(BrokersEnv), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// Cluster is a handle on a Kafka cluster, the embedded broker or a real
// Kafka, with the helpers exactly-once tests need. Its methods are safe for
// concurrent use; each call opens and closes its own connections.
type Cluster struct {
	name   string
	addrs  []string
	adjust func(*sarama.Config) error // nil: plaintext
	broker *Broker
	scope  string        // the test name for Unique, "" outside a test
	calls  atomic.Uint32 // Unique's calls: its names never repeat within a Cluster
}

// ForEachCluster runs fn as the subtest "embedded" against a fresh embedded
// broker (started with opts), then as the subtest "kafka" against the real cluster in
// EDDY_TEST_BROKERS; the "kafka" subtest is skipped when the variable is not
// set, and fails when the cluster cannot be reached. fn may call t.Parallel.
func ForEachCluster(t *testing.T, fn func(t *testing.T, c *Cluster), opts ...Option) {
	t.Helper()
	t.Run(EmbeddedName, func(t *testing.T) {
		fn(t, Embedded(t, opts...))
	})
	t.Run(KafkaName, func(t *testing.T) {
		addrs := BrokersFromEnv()
		if len(addrs) == 0 {
			t.Skipf("%s is not set: no real Kafka to run against (see integration/kafka.sh)", BrokersEnv)
		}
		fn(t, Connect(t, KafkaName, addrs))
	})
}

// Embedded starts an embedded broker for the test (closed when the test
// ends) and returns it as a Cluster named "embedded".
func Embedded(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	b := Start(tb, opts...)
	c := b.Cluster()
	c.scope = tb.Name()
	return c
}

// Connect returns a Cluster for the running cluster at addrs, after checking
// that it answers within 15 seconds; it fails the test otherwise.
func Connect(tb testing.TB, name string, addrs []string) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := Dial(ctx, name, addrs)
	if err != nil {
		tb.Fatal(err)
	}
	c.scope = tb.Name()
	return c
}

// Dial returns a Cluster for the running cluster at addrs once it answers,
// retrying until ctx ends. It is [Connect] for code that is not a test.
func Dial(ctx context.Context, name string, addrs []string) (*Cluster, error) {
	return DialWith(ctx, name, addrs, nil)
}

// DialWith is [Dial] for a cluster that needs more than a plaintext connection:
// adjust (for example eddy.Security.ApplyTo) sets the TLS and SASL of every sarama
// configuration the Cluster's helpers make. An error of adjust ends the dial at once.
func DialWith(ctx context.Context, name string, addrs []string, adjust func(*sarama.Config) error) (*Cluster, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("kafkatest: dial the %s cluster: no addresses", name)
	}
	for {
		ep := endpoint{list: addrs, adjust: adjust}
		if _, err := ep.config(); err != nil {
			return nil, err
		}
		err := withClient(ctx, ep, func(client sarama.Client) error {
			_, err := client.Controller()
			return err
		})
		if err == nil {
			return &Cluster{name: name, addrs: append([]string(nil), addrs...), adjust: adjust}, nil
		}
		if refused(err) {
			return nil, fmt.Errorf("kafkatest: the %s cluster at %v refused the connection: %w", name, addrs, err)
		}
		if serr := sleep(ctx, 500*time.Millisecond); serr != nil {
			return nil, fmt.Errorf("kafkatest: cannot reach the %s cluster at %v: %w", name, addrs, err)
		}
	}
}

// WithSarama returns a Cluster on the same brokers whose helpers apply adjust
// (for example eddy.Security.ApplyTo) to every sarama configuration they make:
// for an embedded broker started with TLS or SASL.
func (c *Cluster) WithSarama(adjust func(*sarama.Config) error) *Cluster {
	return &Cluster{name: c.name, addrs: c.addrs, adjust: adjust, broker: c.broker, scope: c.scope}
}

func (c *Cluster) endpoint() endpoint { return endpoint{list: c.addrs, adjust: c.adjust} }

// refused reports whether err is a refusal that retrying cannot change: the
// broker's certificate is not trusted, or the credentials are wrong.
func refused(err error) bool {
	var verify *tls.CertificateVerificationError
	return errors.As(err, &verify) || errors.Is(err, sarama.ErrSASLAuthenticationFailed)
}

// Name returns "embedded" or "kafka" (or the name given to [Connect]).
func (c *Cluster) Name() string { return c.name }

// Addrs returns the bootstrap addresses.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Broker returns the embedded broker, or nil for a real cluster. Tests that
// inject faults with [Broker.Kfake] run only where it is not nil.
func (c *Cluster) Broker() *Broker { return c.broker }

// Unique returns a topic or group name unique to this test and call:
// "<prefix>-<hash of the test name>-<random>-<call number>", for example
// "wordcount-3f2a9c1e-7b41d2-1" (outside a test, the hash is of ""). The call
// number keeps the names of one Cluster apart; the random part, those of
// earlier runs on a real cluster. Characters
// Kafka does not allow in topic names become '-'. Use it for every topic,
// group, application ID and transactional ID: a real cluster keeps them
// across tests and test runs.
func (c *Cluster) Unique(prefix string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(c.scope))
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, prefix)
	if len(clean) > 180 {
		clean = clean[:180]
	}
	return fmt.Sprintf("%s-%08x-%06x-%d", clean, h.Sum32(), rand.Uint32()&0xffffff, c.calls.Add(1))
}

// CreateTopic creates a topic with the given partitions and topic configs
// (nil for none) and waits until every partition has a leader. The
// replication factor is the broker's default (1 on the test brokers).
func (c *Cluster) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	return createTopic(ctx, c.endpoint(), name, partitions, configs)
}

// Produce writes msgs to topic with an idempotent producer, acks=all, and
// waits for every acknowledgement. A keyed message goes to the partition
// Kafka's Java producer would choose (murmur2), an unkeyed one to any
// partition. Produce sets each message's Topic, and sarama fills in its
// Partition and Offset.
func (c *Cluster) Produce(ctx context.Context, topic string, msgs ...*sarama.ProducerMessage) error {
	return produce(ctx, c.endpoint(), topic, -1, msgs)
}

// ProduceToPartition is [Cluster.Produce] to one given partition.
func (c *Cluster) ProduceToPartition(ctx context.Context, topic string, partition int32, msgs ...*sarama.ProducerMessage) error {
	if partition < 0 {
		return fmt.Errorf("kafkatest: produce to %q: negative partition %d", topic, partition)
	}
	return produce(ctx, c.endpoint(), topic, partition, msgs)
}

// ProduceTxn writes msgs, each to the Topic and Partition it names, in one transaction
// of a new transactional producer with ID txnID, and commits the transaction, or
// aborts it when commit is false. ctx is checked between the transaction's steps.
func (c *Cluster) ProduceTxn(ctx context.Context, txnID string, commit bool, msgs ...*sarama.ProducerMessage) error {
	return produceTxn(ctx, c.endpoint(), txnID, commit, msgs)
}

// ReadCommitted returns what a read_committed consumer sees of topic: every
// record of committed transactions and every non-transactional record, from
// the log start to the last stable offset at the time of the call, ordered
// by partition, then offset. Records of open transactions (beyond the last
// stable offset) are not waited for; call [Cluster.WaitStable] first to wait
// until no transaction is open.
func (c *Cluster) ReadCommitted(ctx context.Context, topic string) ([]*sarama.ConsumerMessage, error) {
	return readCommitted(ctx, c.endpoint(), topic)
}

// EndOffsets returns, per partition of topic, the offset after the last
// record: the high watermark under sarama.ReadUncommitted, the last stable
// offset (first offset of the oldest open transaction) under
// sarama.ReadCommitted.
func (c *Cluster) EndOffsets(ctx context.Context, topic string, isolation sarama.IsolationLevel) (map[int32]int64, error) {
	return endOffsets(ctx, c.endpoint(), topic, isolation)
}

// CommittedOffsets returns the group's committed offset per partition of
// topic: the offset of the next record to consume, or -1 where the group has
// committed none. It asks as a read_committed group member does
// (RequireStable, KIP-447): offsets of a committed transaction whose markers
// Kafka has not yet written are waited for, not missed, so it is safe to
// call right after CommitTxn.
func (c *Cluster) CommittedOffsets(ctx context.Context, group, topic string) (map[int32]int64, error) {
	return committedOffsets(ctx, c.endpoint(), group, topic)
}

// WaitStable waits until no transaction is open on topic: the last stable
// offset equals the high watermark on every partition. It returns ctx's
// error, with the offsets, if that does not happen before ctx ends.
func (c *Cluster) WaitStable(ctx context.Context, topic string) error {
	for {
		lso, err := c.EndOffsets(ctx, topic, sarama.ReadCommitted)
		if err != nil {
			return err
		}
		hwm, err := c.EndOffsets(ctx, topic, sarama.ReadUncommitted)
		if err != nil {
			return err
		}
		stable := true
		for p, h := range hwm {
			if lso[p] != h {
				stable = false
			}
		}
		if stable {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("kafkatest: %q still has open transactions (last stable offsets %v, high watermarks %v): %w", topic, lso, hwm, err)
		}
	}
}
