package eddy

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/processor"
)

// Config configures an App. ApplicationID and Brokers are required; every other setting
// has a safe default.
type Config struct {
	// ApplicationID names the application: it is the consumer group ID and the prefix
	// of its internal topics and transactional IDs. Letters, digits, '.', '_' and '-'.
	ApplicationID string
	// Brokers are the bootstrap addresses, host:port.
	Brokers []string
	// InstanceID makes the instance a static member of the consumer group (KIP-345:
	// Kafka's group.instance.id): restarted with the same InstanceID within the
	// group's session timeout, it gets its tasks back with no rebalance (the other
	// instances go on processing, in the same generation), and with the same StateDir
	// its stores restore only their tails; a graceful stop does not leave the group.
	// Give each instance its own, stable across restarts (a Kubernetes StatefulSet's
	// pod name): two running instances with one InstanceID fence each other, and the
	// one fenced stops with an error. Letters, digits, '.', '_' and '-', at most 249.
	// Default empty: a dynamic member, which leaves the group when it stops (every
	// stop and start is a rebalance). Raise the session timeout (Config.Sarama:
	// Consumer.Group.Session.Timeout, 10 s by default) above the time a restart takes:
	// a static member that stays away longer is removed and its tasks move
	// (docs/operations.md, "Static membership"). This is not the instance ID kept in
	// the state dir (InstanceIDFile), which names the transactional IDs.
	InstanceID string
	// NumStandbyReplicas is how many standby replicas each task with persistent logged
	// stores keeps on other instances (Kafka Streams' num.standby.replicas): a standby
	// opens the task's stores in its own state dir and tails their changelogs
	// (read_committed, never past the last stable offset) into them, keeping their
	// checkpoints; it processes nothing and writes nothing to Kafka. When the active
	// task's instance dies, the task goes to an instance holding a standby, which
	// restores only the tail the standby had not read yet, instead of the whole
	// changelog. A standby is never placed on the instance running the task (nor two
	// on one instance): with fewer other instances the task has fewer standbys, and
	// the leader says so in a log line. Each standby costs its instance the store's
	// disk and a few changelog requests a second. Default 0: none, and a
	// moved task restores from wherever its new instance's state is (the whole
	// changelog on an instance that never held it). In-memory stores and stores
	// restored from their source topic are not kept by standbys (docs/architecture.md,
	// "Standby replicas").
	NumStandbyReplicas int
	// AcceptableRecoveryLag is how far (changelog records, summed over a task's stores
	// a standby keeps) an instance's state of a task may be behind and still take the
	// task over at once (Kafka Streams' acceptable.recovery.lag). When the balanced
	// plan gives a task to an instance further behind (one that just joined) while
	// another is caught up (the one running it), the task stays where it runs and the
	// new instance gets a warm-up replica of it; a probing rebalance moves the task
	// once the warm-up is within this lag, so it pauses only for the tail instead of a
	// whole restore. A task whose instance is gone goes to an instance whose state is
	// within this lag (its standby) even when that instance already runs its share.
	// Default 10000 (Kafka Streams' default).
	AcceptableRecoveryLag int64
	// MaxWarmupReplicas bounds the warm-up replicas in the whole group at a time
	// (Kafka Streams' max.warmup.replicas): each reads a changelog from its start, so
	// this bounds the extra load a scale-up puts on the brokers. Default 2 (Kafka
	// Streams' default); -1: no warm-ups, a task moves at once and restores where it
	// goes (as before warm-ups existed).
	MaxWarmupReplicas int
	// ProbingRebalanceInterval is how often an instance with warm-up replicas asks
	// for a new generation once one of them is within AcceptableRecoveryLag, so the
	// task moves (Kafka Streams' probing.rebalance.interval.ms). Under eager
	// rebalancing each such rebalance stops every task of the group for a moment; under
	// CooperativeRebalancing only the task that moves. Default
	// 10 min (Kafka Streams' default); at least 1 s.
	ProbingRebalanceInterval time.Duration
	// RebalanceProtocol is EagerRebalancing (the default: every task of the group
	// pauses at each rebalance) or CooperativeRebalancing (only the tasks that move
	// stop; a probing rebalance then pauses nothing but the task it moves). Give every
	// instance of an application the same.
	RebalanceProtocol RebalanceProtocol
	// Rack names where this instance runs (a zone, a rack): a task's standby replicas
	// go to instances on other racks than its active task and than each other where
	// there are such instances (KIP-925-like), else anywhere, with a log line. Default
	// empty: no rack, no constraint. It does not set sarama's Consumer.RackID (fetching
	// from a follower, KIP-392: docs/operations.md, "Racks").
	Rack string
	// StateDir holds the task stores: <StateDir>/<ApplicationID>/<taskID>/. Default:
	// <os.TempDir()>/eddy. A state dir is used by one instance at a time.
	StateDir string
	// Guarantee is ExactlyOnce (default) or AtLeastOnce.
	Guarantee Guarantee
	// CommitInterval is how often each task commits. Default 100 ms under exactly-once
	// (it bounds the latency of output visible to read_committed readers) and 1 s under
	// at-least-once (it bounds the records processed twice after a crash). Under
	// exactly-once it must be below TransactionTimeout (New refuses it otherwise: the
	// broker would abort every transaction).
	CommitInterval time.Duration
	// CommitRecords makes a task commit after that many records even before
	// CommitInterval; default 10000. It bounds the input kept in memory for replay.
	CommitRecords int
	// TransactionTimeout bounds how long the transaction of a crashed instance can
	// block read_committed readers; default 10 s (as Kafka Streams). The next owner of
	// that instance's tasks waits for such a transaction to end before it restores them
	// (up to this plus the broker's 10 s check and 5 s, then retries;
	// docs/architecture.md, "Reading to the end of a partition"): give every instance
	// of an application the same value. It must not exceed the broker's
	// transaction.max.timeout.ms (15 min by default; Run fails naming both).
	//
	// Its order against the group session timeout (10 s, Config.Sarama's
	// Consumer.Group.Session.Timeout) is free, unlike in Kafka Streams, whose defaults
	// keep the session (45 s) above the transaction timeout (10 s) so that a crashed
	// owner's transaction is gone before its tasks move: eddy's next owner waits for
	// such a transaction at the end of the changelogs instead, so either order is
	// correct. A task of a crashed instance resumes after about the longer of the
	// session timeout and the transaction timeout plus the broker's abort check (up to
	// 10 s). New neither refuses nor warns of either order.
	TransactionTimeout time.Duration
	// TaskTimeout bounds how long readying a task (restoring its stores, reading its
	// offsets record) may keep failing with errors that can pass — a broker or
	// coordinator away, commit markers pending, a topic missing — before the
	// application stops with an error naming the task, what failed and this setting,
	// as Kafka Streams gives up after task.timeout.ms; default 5 min (Kafka Streams'
	// default). It counts from a task's first failed attempt in a session; a rebalance
	// starts it again. Without it a changelog deleted under a running application made
	// the tasks that moved retry every 5 s for ever.
	TaskTimeout time.Duration
	// RepartitionPurgeInterval is how often a task deletes the records of the
	// repartition topics it reads below its committed offsets (DeleteRecords), as Kafka
	// Streams does, and the records of its window and session stores' changelogs that
	// only expired windows need (docs/architecture.md, "Window stores and segments");
	// default 30 s. Repartition topics keep records without time limit
	// (retention.ms -1): records re-keyed from old input carry old timestamps, and
	// time-based retention could delete them before they are read.
	RepartitionPurgeInterval time.Duration
	// ReplicationFactor of the internal topics eddy creates; default -1 (the broker's
	// default.replication.factor, which is 1 unless the cluster sets it). On a
	// production cluster use 3 (docs/operations.md, "Production cluster").
	ReplicationFactor int16
	// InternalTopicConfigs are topic configs for the internal topics eddy creates
	// (changelogs, repartition topics), like Kafka Streams' "topic."-prefixed settings:
	// e.g. {"min.insync.replicas": "2"} where the broker's default is lower. The configs
	// eddy's correctness depends on (cleanup.policy, retention.ms, retention.bytes)
	// cannot be set here. Topics that exist already are not changed.
	InternalTopicConfigs map[string]string
	// OnBadRecord: what to do with a record that cannot be deserialized; default
	// FailOnBadRecord. DeadLetterTopic must exist when DeadLetterBadRecord is chosen
	// (here or in OnOutputError).
	OnBadRecord BadRecordPolicy
	// OnOutputError: what to do with an output record that can never be written, one
	// larger than its topic's max.message.bytes (Kafka Streams' ProductionExceptionHandler;
	// KIP-1034's dead-letter queue). FailOnBadRecord (the default) stops the application
	// with an OutputRecordError naming the input record, the output topic, the record's
	// size and the topic's limit; SkipBadRecord drops the output record with a warning
	// and a metric (the input record's other output goes on); DeadLetterBadRecord writes
	// the input record, as it was read, to DeadLetterTopic with its origin, the node and
	// the error in headers (HeaderDeadLetter*), inside the task's transaction, once per
	// input record, and drops the output record. A record without an input record (a
	// punctuator's) is dropped under DeadLetterBadRecord. eddy sees a record is too large
	// before sending it (it reads the topic's max.message.bytes, which needs the
	// DescribeConfigs ACL on the topic, and compares the uncompressed size). A refusal
	// only the broker gives (with Producer.Compression set, without that ACL, a record
	// refused as invalid) aborts the transaction; under exactly-once the replay finds
	// the record and applies the policy, under at-least-once the application stops
	// whatever the policy (docs/operations.md, "When a record cannot be written").
	OnOutputError BadRecordPolicy
	// OnProcessingError: what to do with an input record whose processing failed in a
	// processor's code, an error it returned or a panic (Kafka Streams'
	// ProcessingExceptionHandler, KIP-1033). FailOnBadRecord (the default) stops the
	// application with a ProcessError naming the task, the node and the record;
	// SkipBadRecord goes on with the next record, with a warning and a metric;
	// DeadLetterBadRecord writes the record as read to DeadLetterTopic (headers: origin,
	// node, error) in the task's transaction and goes on. What the record did before
	// the failure (records forwarded, stores written) stays. Errors of sinks, of the
	// producer and of punctuators always stop the application.
	OnProcessingError BadRecordPolicy
	DeadLetterTopic   string
	// MaxTaskIdle is Kafka Streams' max.task.idle.ms: how a task with several input
	// partitions (a join, a merge) waits for an empty one before it processes the
	// others past it, so that it sees their records in timestamp order.
	//   - 0 (the default, as Kafka Streams'): it waits while records are known to be on
	//     the broker beyond what the partition's claim delivered (its high-water mark
	//     above the offset after its last record), and no longer. sarama's claim
	//     reports neither the last stable offset nor its position past transaction
	//     markers, so the task reads that gap (one Fetch) and stops waiting when it
	//     holds only markers, aborted records or an open transaction's; in any case the
	//     wait ends after 5 s (docs/dsl.md, "Processing order across input partitions").
	//   - > 0: besides, it waits up to this long for an empty partition with nothing
	//     known on the broker.
	//   - < 0: it never waits (eddy's behaviour before Kafka Streams' default): what
	//     is buffered is processed, in timestamp order among the partitions holding
	//     records. Tasks of one input partition never wait.
	// A partition that stays empty delays its task once per silence, not at every
	// record; when the wait ends the task processes what it has ("enforced processing":
	// eddy_enforced_processing_total, a debug log line). The wait is checked every
	// 100 ms at the least.
	MaxTaskIdle time.Duration
	// Workers is the number of workers of an instance: each runs a share of the
	// instance's tasks on one goroutine with one producer, and commits them in one
	// transaction (Kafka Streams' exactly_once_v2 and num.stream.threads). Default:
	// GOMAXPROCS. A worker processes nothing while its commit's round trips run, so
	// with few tasks and slow commits more workers than cores can pay (BENCHMARKS.md,
	// "After: a producer per worker"). Ignored with ProducerPerTask.
	Workers int
	// ProducerPerTask gives every task its own goroutine and its own transactional
	// producer, as eddy did before workers (and Kafka Streams' exactly_once "v1"): a
	// zombie is fenced by the task's transactional ID. It costs a client, connections
	// and a transaction per task per commit interval; see docs/architecture.md for when
	// it may still be the right choice.
	ProducerPerTask bool
	// OverlapCommits lets a worker go on processing while its commit's round trips run
	// (flush, AddOffsetsToTxn, TxnOffsetCommit, EndTxn): the next transaction's state
	// changes fill a write buffer over the committing one's and its output waits in
	// memory until the commit answers; a failed commit rolls both back and replays their
	// input. Exactly-once only; ignored with sinks outside Kafka (package sink). Off by
	// default: here it gained 2-12% throughput for 45-50% more peak RSS. (Two of its long
	// harness runs stalled after a broker kill -9; the cause is a Kafka group-coordinator
	// race that stalls any exactly-once consumer, docs/kafka-notes.md.) See
	// docs/architecture.md, "Overlapped commits", and BENCHMARKS.md.
	OverlapCommits bool
	// StoreNoSync skips the fsync of each store flush. Off by default: a flush then
	// costs 1.2-1.8 times less (BENCHMARKS.md), but after a machine crash (not a process
	// crash) every store that was open is rebuilt from its whole changelog instead of
	// its tail. Either way nothing is lost: the changelog is the durable copy.
	StoreNoSync bool
	// StoreWriteInterval is how long a task may hold the committed changes of its
	// stores in memory before it writes them to its store file, with their changelog
	// checkpoints, in one bbolt transaction and fsync; also written when a task holds
	// 10,000 changed keys, stops or restores. Default 1 s. A commit then costs no store
	// write at all most of the time: with 64 tasks per worker and 100 ms commits, the
	// writes and fsyncs were a third of every commit (BENCHMARKS.md). A crash costs a
	// longer changelog tail to restore (at most this interval's changes), never a
	// wrong store: the file always holds data and checkpoints of one moment. A value
	// at or below CommitInterval writes at every commit. Window and session stores are
	// written at every commit. A persistent store without a changelog
	// (WithoutChangelog) has no tail to restore: a crash loses up to this interval of
	// its committed changes, while the input that made them stays committed. Even a
	// write at every commit would not close that window (the write follows the
	// transaction's commit), so such a store is never covered by exactly-once.
	StoreWriteInterval time.Duration
	// Security: TLS and SASL for every client eddy creates; default plaintext.
	Security Security
	// Sarama, if set, adjusts the sarama configuration eddy builds (TLS, SASL, client
	// ID, timeouts). Settings exactly-once depends on are enforced after it runs.
	// Consumer.Fetch.Default left at sarama's 1 MiB lets eddy size the fetches: 4 MiB
	// shared by all the application's source partitions, 16 KiB to 1 MiB each (memory
	// grows with partitions × fetch size); any other value is used as it is.
	Sarama func(*sarama.Config)
	// Logger receives eddy's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics, if set, receives eddy's Prometheus metrics (eddy_*, with the constant
	// label application_id). When it is also a prometheus.Gatherer (a
	// *prometheus.Registry), App.Handler serves it at /metrics.
	Metrics prometheus.Registerer
	// AdvertisedAddr is the host:port where this instance serves App.Handler, announced
	// to the group (like Kafka Streams' application.server) so that interactive queries
	// for keys held elsewhere are forwarded to their owner. Empty: not announced.
	AdvertisedAddr string
	// OnRestore, if set, is told about every store restore when a task starts (like
	// Kafka Streams' StateRestoreListener): how many records it read, from where.
	OnRestore func(task processor.TaskID, result changelog.Result)
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("eddy: bad config")

var appIDPattern = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func configErr(setting, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, setting, fmt.Sprintf(format, args...))
}

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if err := c.checkAddresses(); err != nil {
		return c, err
	}
	if err := c.commitDefaults(); err != nil {
		return c, err
	}
	if c.Workers < 0 {
		return c, configErr("Workers", "%d is negative", c.Workers)
	}
	if c.Workers == 0 {
		c.Workers = goruntime.GOMAXPROCS(0)
	}
	if c.NumStandbyReplicas < 0 {
		return c, configErr("NumStandbyReplicas", "%d is negative: want 0 (no standbys) or the number of standby replicas per task", c.NumStandbyReplicas)
	}
	if err := c.checkWarmups(); err != nil {
		return c, err
	}
	if err := c.checkRebalanceProtocol(); err != nil {
		return c, err
	}
	if err := c.checkInternalTopics(); err != nil {
		return c, err
	}
	if err := c.checkPolicies(); err != nil {
		return c, err
	}
	if err := c.Security.validate(); err != nil {
		return c, err
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(os.TempDir(), "eddy")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// checkAddresses checks the application ID, the brokers and the advertised address.
func (c *Config) checkAddresses() error {
	if c.ApplicationID == "" {
		return configErr("ApplicationID", "required")
	}
	if !appIDPattern.MatchString(c.ApplicationID) || len(c.ApplicationID) > 200 {
		return configErr("ApplicationID", "%q: use at most 200 letters, digits, '.', '_' and '-'", c.ApplicationID)
	}
	if len(c.Brokers) == 0 {
		return configErr("Brokers", "required (host:port of at least one broker)")
	}
	for _, b := range c.Brokers {
		if i := strings.LastIndex(b, ":"); i <= 0 || i == len(b)-1 {
			return configErr("Brokers", "%q is not host:port", b)
		}
	}
	if c.InstanceID != "" && (!appIDPattern.MatchString(c.InstanceID) || len(c.InstanceID) > 249 || c.InstanceID == "." || c.InstanceID == "..") {
		// Kafka's own check of group.instance.id (JoinGroupRequest.validateGroupInstanceId):
		// made here, the mistake is named at New rather than refused at every join.
		return configErr("InstanceID", "%q: use at most 249 letters, digits, '.', '_' and '-' (not \".\" or \"..\"), e.g. the pod name", c.InstanceID)
	}
	if c.AdvertisedAddr != "" {
		if i := strings.LastIndex(c.AdvertisedAddr, ":"); i <= 0 || i == len(c.AdvertisedAddr)-1 {
			return configErr("AdvertisedAddr", "%q is not host:port", c.AdvertisedAddr)
		}
	}
	return nil
}
