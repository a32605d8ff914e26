//go:build unix

// Command unstable-wedge reproduces, without eddy, the second face of the broker bug
// behind stale-offsets (docs/kafka-notes.md, "The group coordinator after a restart"):
// after a kill -9 and restart of a single-node Kafka 4.1.1, the group coordinator can
// keep answering UNSTABLE_OFFSET_COMMIT for a partition for good, as if a transaction
// that committed its offset were still open, although every transaction has ended
// and the group's __consumer_offsets partition holds an end marker after every
// transactional offset commit. A read_committed consumer cannot start on that
// partition, so the transaction that would clear it never comes: the partition is
// wedged until the coordinator reloads (a broker restart).
//
// It runs what an exactly-once consumer does, with nothing else: one owner per
// partition of a topic, each with its own transactional ID, reads its committed
// offset with RequireStable (KIP-447), and then commits offset after offset, one
// transaction each (AddOffsetsToTxn + TxnOffsetCommit + EndTxn, no records). On any
// error it closes its producer and starts over: a new producer (InitProducerId on the
// same transactional ID) and a new stable read. The command lets them build up the
// __consumer_offsets log, then kills the broker with integration/kafka.sh kill9,
// restarts it, and watches: an owner whose stable reads have answered
// UNSTABLE_OFFSET_COMMIT for longer than -wedge-after is wedged. It then restarts the
// broker once more and reports whether that cleared it. With -clear it first tries to
// clear the wedge from the client: for each wedged owner's transactional ID, a
// transaction that adds the group's offsets and aborts (an end marker from that
// producer ID makes the coordinator drop its pending offsets).
//
//	EDDY_KAFKA_HOME=/tmp/eddy-kafka-wedge EDDY_KAFKA_PORT=39092 EDDY_KAFKA_CONTROLLER_PORT=39093 \
//	  go run ./integration/eos/cmd/unstable-wedge -kafka-script integration/kafka.sh -restarts 10
//
// It exits 1 when a partition wedged, 0 when none did, 2 on errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/integration/eos"
	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/kafkatest"
)

func main() { os.Exit(run()) }

func run() int {
	script := flag.String("kafka-script", "integration/kafka.sh", "integration/kafka.sh; its broker is killed and restarted")
	partitions := flag.Int("partitions", 6, "partitions, one owner (transactional ID) each")
	restarts := flag.Int("restarts", 10, "kill -9 and restart the broker this many times")
	warmup := flag.Duration("warmup", 60*time.Second, "commits before the first kill (the coordinator's load time grows with them)")
	between := flag.Duration("between", 150*time.Second, "time from one restart to the next kill")
	wedgeAfter := flag.Duration("wedge-after", 90*time.Second, "UNSTABLE_OFFSET_COMMIT for longer than this is a wedge (the transaction timeout is 10 s)")
	interval := flag.Duration("interval", 20*time.Millisecond, "pause between one owner's commits")
	clear := flag.Bool("clear", false, "on a wedge, first try to clear it from the client: abort a transaction of each wedged owner's transactional ID that added the group's offsets")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := eos.ScriptBroker{Script: *script}
	addr, err := b.Start(ctx) // the running broker's address, or a fresh one's
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := kafkatest.Dial(ctx, "kafka", []string{addr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "unstable-wedge-"+suffix, "unstable-wedge-group-"+suffix
	if err := c.CreateTopic(ctx, topic, int32(*partitions), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	owners := make([]*owner, *partitions)
	var wg sync.WaitGroup
	for i := range owners {
		owners[i] = &owner{addr: addr, topic: topic, group: group, partition: int32(i), txnID: group + "-" + strconv.Itoa(i), interval: *interval}
		wg.Add(1)
		go func() { defer wg.Done(); owners[i].run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()
	logf("topic %s, group %s, %d owners; committing for %v before the first kill", topic, group, *partitions, *warmup)
	if err := backoff.Sleep(ctx, *warmup); err != nil {
		return 2
	}
	for r := 1; r <= *restarts; r++ {
		logf("restart %d: %d commits so far; kill -9", r, committed(owners))
		if err := b.Kill(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := b.Restart(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		logf("restart %d: the broker serves again", r)
		end := time.Now().Add(*between)
		for time.Now().Before(end) {
			if w := wedged(owners, *wedgeAfter); len(w) > 0 {
				logf("WEDGED after restart %d: %s", r, w)
				if *clear {
					clearWedges(ctx, addr, owners, *wedgeAfter)
				}
				return confirm(ctx, b, owners, *wedgeAfter)
			}
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return 2
			}
		}
	}
	logf("no partition wedged in %d restarts (%d commits)", *restarts, committed(owners))
	return 0
}

// confirm restarts the broker once more and reports whether the wedge cleared: the
// coordinator's state is rebuilt from the log, which holds an end marker after every
// transactional offset commit.
func confirm(ctx context.Context, b eos.ScriptBroker, owners []*owner, wedgeAfter time.Duration) int {
	if err := b.Restart(ctx); err != nil { // kafka.sh restart stops the broker first
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	before := committed(owners)
	deadline := time.Now().Add(wedgeAfter)
	for time.Now().Before(deadline) {
		if len(wedged(owners, time.Nanosecond)) == 0 && committed(owners) > before {
			logf("after one more restart every partition commits again: the wedge was in the coordinator's memory only")
			return 1
		}
		if err := backoff.Sleep(ctx, time.Second); err != nil {
			return 2
		}
	}
	logf("still wedged after one more restart: %s", wedged(owners, time.Nanosecond))
	return 1
}

// clearWedges aborts, for each wedged owner's transactional ID, a transaction that
// added the group's offsets (InitProducerId, AddOffsetsToTxn, EndTxn abort): the
// transaction coordinator then writes an ABORT marker for that producer ID to the
// group's __consumer_offsets partition, and the group coordinator drops the producer
// ID's pending offsets. It reports whether the wedge cleared.
func clearWedges(ctx context.Context, addr string, owners []*owner, wait time.Duration) {
	cfg := kafkatest.NewSaramaConfig()
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		logf("clear: %v", err)
		return
	}
	defer client.Close()
	for _, o := range owners {
		if wedged([]*owner{o}, time.Nanosecond) == "" {
			continue
		}
		if err := abortWithOffsets(client, o.txnID, o.group); err != nil {
			logf("clear %s: %v", o.txnID, err)
			continue
		}
		logf("clear: aborted a transaction of %s that added the group's offsets", o.txnID)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if wedged(owners, time.Nanosecond) == "" {
			logf("CLEARED from the client, without a restart")
			return
		}
		if err := backoff.Sleep(ctx, time.Second); err != nil {
			return
		}
	}
	logf("not cleared from the client: %s", wedged(owners, time.Nanosecond))
}

func abortWithOffsets(client sarama.Client, txnID, group string) error {
	coordinator, err := client.TransactionCoordinator(txnID)
	if err != nil {
		return err
	}
	ip, err := coordinator.InitProducerID(&sarama.InitProducerIDRequest{TransactionalID: &txnID, TransactionTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	if ip.Err != sarama.ErrNoError {
		return fmt.Errorf("InitProducerId: %w", ip.Err)
	}
	ao, err := coordinator.AddOffsetsToTxn(&sarama.AddOffsetsToTxnRequest{TransactionalID: txnID, ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, GroupID: group})
	if err != nil {
		return err
	}
	if ao.Err != sarama.ErrNoError {
		return fmt.Errorf("AddOffsetsToTxn: %w", ao.Err)
	}
	et, err := coordinator.EndTxn(&sarama.EndTxnRequest{TransactionalID: txnID, ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, TransactionResult: false})
	if err != nil {
		return err
	}
	if et.Err != sarama.ErrNoError {
		return fmt.Errorf("EndTxn: %w", et.Err)
	}
	logf("clear: %s is producer ID %d, epoch %d", txnID, ip.ProducerID, ip.ProducerEpoch)
	return nil
}

// owner commits the offsets of one partition as an exactly-once consumer would.
type owner struct {
	addr, topic, group string
	partition          int32
	txnID              string
	interval           time.Duration

	mu            sync.Mutex
	unstableSince time.Time // first UNSTABLE_OFFSET_COMMIT of the current run of them; zero: none
	commits       int
}

func (o *owner) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := o.session(ctx); err != nil && ctx.Err() == nil {
			_ = backoff.Sleep(ctx, 500*time.Millisecond)
		}
	}
}

// session is one producer's life: a stable read of the committed offset, then
// commits until one fails.
func (o *owner) session(ctx context.Context) error {
	cfg := kafkatest.NewSaramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = o.txnID
	cfg.Producer.Transaction.Timeout = 10 * time.Second
	client, err := sarama.NewClient([]string{o.addr}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	offset, err := o.stableOffset(ctx, client)
	if err != nil {
		return err
	}
	p, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return err
	}
	defer p.Close()
	for ctx.Err() == nil {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		offset++
		err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{o.topic: {{Partition: o.partition, Offset: offset}}}, o.group)
		if err == nil {
			err = p.CommitTxn()
		}
		if err != nil {
			_ = p.AbortTxn()
			return err
		}
		o.mu.Lock()
		o.commits++
		o.mu.Unlock()
		if err := backoff.Sleep(ctx, o.interval); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// stableOffset reads the partition's committed offset with RequireStable, waiting
// while the coordinator answers UNSTABLE_OFFSET_COMMIT.
func (o *owner) stableOffset(ctx context.Context, client sarama.Client) (int64, error) {
	for {
		coordinator, err := client.Coordinator(o.group)
		if err != nil {
			return 0, err
		}
		req := sarama.NewOffsetFetchRequest(client.Config().Version, o.group, map[string][]int32{o.topic: {o.partition}})
		req.RequireStable = true
		resp, err := coordinator.FetchOffset(req)
		if err != nil {
			// A wedge is counted only while the coordinator answers: not across a
			// restart of the broker.
			o.mu.Lock()
			o.unstableSince = time.Time{}
			o.mu.Unlock()
			_ = client.RefreshCoordinator(o.group)
			return 0, err
		}
		block := resp.GetBlock(o.topic, o.partition)
		switch {
		case block == nil:
			return 0, fmt.Errorf("no answer for %s/%d", o.topic, o.partition)
		case errors.Is(block.Err, sarama.ErrUnstableOffsetCommit):
			o.mu.Lock()
			if o.unstableSince.IsZero() {
				o.unstableSince = time.Now()
			}
			o.mu.Unlock()
			if err := backoff.Sleep(ctx, 500*time.Millisecond); err != nil {
				return 0, err
			}
			continue
		case block.Err != sarama.ErrNoError:
			o.mu.Lock()
			o.unstableSince = time.Time{}
			o.mu.Unlock()
			return 0, block.Err
		}
		o.mu.Lock()
		o.unstableSince = time.Time{}
		o.mu.Unlock()
		if block.Offset < 0 {
			return 0, nil
		}
		return block.Offset, nil
	}
}

// wedged names the partitions whose stable reads have answered
// UNSTABLE_OFFSET_COMMIT for longer than after.
func wedged(owners []*owner, after time.Duration) string {
	var out string
	for _, o := range owners {
		o.mu.Lock()
		if !o.unstableSince.IsZero() && time.Since(o.unstableSince) > after {
			out += fmt.Sprintf(" partition %d (UNSTABLE_OFFSET_COMMIT for %.0fs, transactional ID %s)", o.partition, time.Since(o.unstableSince).Seconds(), o.txnID)
		}
		o.mu.Unlock()
	}
	return out
}

func committed(owners []*owner) int {
	n := 0
	for _, o := range owners {
		o.mu.Lock()
		n += o.commits
		o.mu.Unlock()
	}
	return n
}

func logf(format string, args ...any) {
	fmt.Printf("%s unstable-wedge: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
