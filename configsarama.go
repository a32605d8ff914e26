package eddy

import (
	"time"

	"github.com/IBM/sarama"
)

// saramaConfig builds the base sarama configuration of the application;
// autoFetch reports that the per-partition fetch size is eddy's to set (fetchSize).
func (c Config) saramaConfig() (sc *sarama.Config, autoFetch bool, err error) {
	sc = sarama.NewConfig()
	sc.ClientID = c.ApplicationID
	sc.Version = sarama.V3_9_0_0
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	sc.Consumer.Group.Session.Timeout = 10 * time.Second
	// A member learns of a rebalance at its next heartbeat, and under eager rebalancing
	// every task stops when its member learns of it and waits for the last member to
	// learn of it too: at a scale-up 3 -> 4 on real Kafka that wait was up to 1.04 s
	// with 1 s heartbeats and at most 0.18 s with 250 ms, and the pause of a task that
	// does not move 0.10-1.36 s against 0.07-0.74 s (BENCHMARKS.md "Availability"). 4
	// small requests a second per instance cost the coordinator little.
	sc.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
	sc.Consumer.Group.Rebalance.Timeout = 60 * time.Second
	sc.Metadata.RefreshFrequency = time.Minute
	// The fetch size per partition is eddy's to choose (fetchSize) unless the hook
	// below sets another than sarama's default.
	sc.Consumer.Fetch.Default = fetchPerPartitionMax
	if err := c.Security.ApplyTo(sc); err != nil {
		return nil, false, err
	}
	if c.Sarama != nil {
		c.Sarama(sc)
	}
	autoFetch = sc.Consumer.Fetch.Default == fetchPerPartitionMax
	if err := c.Security.checkSkipVerify(sc); err != nil {
		return nil, false, err
	}
	// A broker holds a JoinGroup until every member has rejoined, up to the rebalance
	// timeout, but sarama waits Net.ReadTimeout for any response: with a shorter read
	// timeout a member gives up and joins again while a dead member is still awaited,
	// and the group can stall (seen on the embedded broker after a SIGKILL). The Java
	// client gives JoinGroup the rebalance timeout plus 5 s; sarama has one read
	// timeout, so it gets at least that.
	if least := sc.Consumer.Group.Rebalance.Timeout + 5*time.Second; sc.Net.ReadTimeout < least {
		sc.Net.ReadTimeout = least
	}
	// What correctness depends on, whatever the hook did:
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	// Under exactly-once the offsets go into the transactions. Under at-least-once a
	// task marks its offsets once their output is acknowledged, and sarama commits the
	// marked offsets in the background (and at the end of each session), off the
	// task's path: a synchronous commit waits behind the consumer's fetch long-polls on
	// the same connection.
	sc.Consumer.Offsets.AutoCommit.Enable = c.Guarantee == AtLeastOnce
	sc.Consumer.Offsets.AutoCommit.Interval = c.CommitInterval
	sc.Consumer.Return.Errors = true
	// Static membership is the InstanceID's: a hook setting sarama's own would make a
	// member eddy does not know is static (its docs and errors would be wrong).
	sc.Consumer.Group.InstanceId = c.InstanceID
	if !sc.Version.IsAtLeast(sarama.V2_5_0_0) {
		return nil, false, configErr("Sarama", "Version %s is below 2.5.0, which exactly-once needs (KIP-447)", sc.Version)
	}
	if err := sc.Validate(); err != nil {
		return nil, false, configErr("Sarama", "%v", err)
	}
	return sc, autoFetch, nil
}

// How much a fetch brings per partition, when Config.Sarama leaves
// Consumer.Fetch.Default at sarama's default: fetchBudget shared by every source
// partition of the application (fetchSize), within [fetchPerPartitionMin,
// fetchPerPartitionMax].
//
// Why a budget: sarama decodes a partition's whole share of a fetch response into
// messages before handing out the first (the Java consumer decodes as it polls), at
// ten to twenty times the bytes for small records, and a partition whose task is
// behind holds its share until the task has taken it in. Memory therefore grows with
// partitions × fetch size. At a fixed 256 KiB the 64-partition word count (128 source
// partitions) peaked at 327–422 MB; at the budget's 32 KiB, 211–248 MB (0.29× Kafka
// Streams'). A fixed 32 KiB for everyone cost the 8-partition passthrough 15–36% of
// its throughput instead: small fetches mean more round trips, and sarama has one
// fetch in flight per broker. The budget gives 8 partitions 512 KiB each and 16 the
// 256 KiB eddy used before (BENCHMARKS.md, "Fetch size" and "Fetch budget").
//
// The count is of all the application's source partitions, as if one instance ran
// every task: an instance of several holds fewer, so less.
const (
	fetchBudget          = 4 << 20
	fetchPerPartitionMin = 16 << 10
	fetchPerPartitionMax = 1 << 20 // sarama's default
)

// fetchSize is the per-partition fetch size for an application of n source partitions.
func fetchSize(n int) int32 {
	return int32(min(max(fetchBudget/max(n, 1), fetchPerPartitionMin), fetchPerPartitionMax))
}
