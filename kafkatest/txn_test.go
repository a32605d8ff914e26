package kafkatest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// TestTransactionCommitAndAbort walks through the exactly-once cycle eddy's
// runtime relies on, with a live consumer-group session: consume, begin,
// produce, add the consumed offsets with the session's group metadata
// (KIP-447), commit; then a transaction that is aborted.
func TestTransactionCommitAndAbort(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		in, out, group := c.Unique("in"), c.Unique("out"), c.Unique("group")
		for _, topic := range []string{in, out} {
			if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
				t.Fatal(err)
			}
		}
		var inputs []*sarama.ProducerMessage
		for i := range 10 {
			inputs = append(inputs, msg(in, 0, fmt.Sprintf("in-%d", i)))
		}
		if err := c.ProduceToPartition(ctx, in, 0, inputs...); err != nil {
			t.Fatal(err)
		}

		lg := joinGroup(t, c, groupConfig(), group, []string{in}, groupHooks{})
		sess := lg.session(ctx, t)
		consumed := lg.take(ctx, t, 10)
		if got := consumed[9].Offset; got != 9 {
			t.Fatalf("last consumed offset = %d, want 9", got)
		}

		p := newTxnProducer(t, c, txnConfig(c.Unique("txn")))
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		var outs []*sarama.ProducerMessage
		var want []string
		for _, m := range consumed {
			v := "out-" + string(m.Value)
			want = append(want, v)
			outs = append(outs, msg(out, int32(len(outs)%2), v))
		}
		if err := p.send(ctx, outs...); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
		// Before the commit, the records are beyond the last stable offset.
		lso, err := c.EndOffsets(ctx, out, sarama.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		hwm, err := c.EndOffsets(ctx, out, sarama.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: open transaction: LSO %v, HWM %v", c.Name(), lso, hwm)
		for part, h := range hwm {
			if lso[part] != 0 || h != 5 {
				t.Errorf("open transaction, partition %d: LSO %d, HWM %d; want 0, 5", part, lso[part], h)
			}
		}
		meta := sarama.NewConsumerGroupMetadataFromSession(sess, group, nil)
		if meta.GenerationID < 0 || meta.MemberID == "" {
			t.Fatalf("group metadata from a live session = %+v, want a generation and a member ID", meta)
		}
		err = p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
			in: {{Partition: 0, Offset: consumed[9].Offset + 1}},
		}, meta)
		if err != nil {
			t.Fatalf("AddOffsetsToTxnWithGroupMetadata: %v", err)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatalf("CommitTxn: %v (status %s)", err, p.TxnStatus())
		}
		// Kafka writes the commit markers after EndTxn has answered, so the
		// last stable offset may lag CommitTxn for a moment (kfake writes
		// them before answering).
		if lso, err := c.EndOffsets(ctx, out, sarama.ReadCommitted); err == nil {
			t.Logf("%s: right after CommitTxn: LSO %v", c.Name(), lso)
		}
		if err := c.WaitStable(ctx, out); err != nil {
			t.Fatal(err)
		}

		// The committed records are visible to read_committed readers ...
		got, err := c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		gotValues := values(got)
		slices.Sort(gotValues)
		wantSorted := slices.Clone(want)
		slices.Sort(wantSorted)
		if !slices.Equal(gotValues, wantSorted) {
			t.Errorf("ReadCommitted after commit = %v, want %v", gotValues, wantSorted)
		}
		// ... and to sarama's read_committed consumer.
		for part := int32(0); part < 2; part++ {
			vals, err := consumeValues(ctx, c, out, part, sarama.ReadCommitted, 5)
			if err != nil {
				t.Fatalf("read_committed consumer, partition %d: %v", part, err)
			}
			var wantPart []string
			for i, v := range want {
				if int32(i%2) == part {
					wantPart = append(wantPart, v)
				}
			}
			if !slices.Equal(vals, wantPart) {
				t.Errorf("read_committed consumer, partition %d = %v, want %v", part, vals, wantPart)
			}
		}
		// The group's committed offset is the one added to the transaction.
		committed, err := c.CommittedOffsets(ctx, group, in)
		if err != nil {
			t.Fatal(err)
		}
		if committed[0] != 10 || committed[1] != -1 {
			t.Errorf("committed offsets = %v, want map[0:10 1:-1]", committed)
		}
		// The last stable offset caught up with the high watermark: the
		// commit marker is the last record of each partition.
		lso, err = c.EndOffsets(ctx, out, sarama.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		hwm, err = c.EndOffsets(ctx, out, sarama.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: after commit: LSO %v, HWM %v", c.Name(), lso, hwm)
		for part, h := range hwm {
			if lso[part] != h || h != 6 {
				t.Errorf("after commit, partition %d: LSO %d, HWM %d; want 6, 6 (5 records + commit marker)", part, lso[part], h)
			}
		}

		// An aborted transaction, with records and offsets, changes nothing
		// a read_committed reader or the group can see.
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn (2): %v", err)
		}
		if err := p.send(ctx, msg(out, 0, "aborted-0"), msg(out, 1, "aborted-1")); err != nil {
			t.Fatalf("produce in transaction (2): %v", err)
		}
		err = p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
			in: {{Partition: 0, Offset: 5}},
		}, sarama.NewConsumerGroupMetadataFromSession(sess, group, nil))
		if err != nil {
			t.Fatalf("AddOffsetsToTxnWithGroupMetadata (2): %v", err)
		}
		if err := p.AbortTxn(); err != nil {
			t.Fatalf("AbortTxn: %v (status %s)", err, p.TxnStatus())
		}
		if err := c.WaitStable(ctx, out); err != nil {
			t.Fatal(err)
		}
		got, err = c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		gotValues = values(got)
		slices.Sort(gotValues)
		if !slices.Equal(gotValues, wantSorted) {
			t.Errorf("ReadCommitted after abort = %v, want %v", gotValues, wantSorted)
		}
		committed, err = c.CommittedOffsets(ctx, group, in)
		if err != nil {
			t.Fatal(err)
		}
		if committed[0] != 10 {
			t.Errorf("committed offset after an aborted transaction = %d, want 10", committed[0])
		}
		// read_uncommitted sees the aborted records; read_committed not.
		for part := int32(0); part < 2; part++ {
			vals, err := consumeValues(ctx, c, out, part, sarama.ReadUncommitted, 6)
			if err != nil {
				t.Fatalf("read_uncommitted consumer, partition %d: %v", part, err)
			}
			if last := vals[5]; last != fmt.Sprintf("aborted-%d", part) {
				t.Errorf("read_uncommitted partition %d ends with %q, want the aborted record", part, last)
			}
			vals, err = consumeFor(c, out, part, sarama.ReadCommitted, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(vals) != 5 {
				t.Errorf("read_committed consumer, partition %d, after abort = %v, want the 5 committed records only", part, vals)
			}
		}
		// The producer is still usable: a third transaction commits.
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn (3): %v", err)
		}
		if err := p.send(ctx, msg(out, 0, "third")); err != nil {
			t.Fatalf("produce in transaction (3): %v", err)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatalf("CommitTxn (3): %v", err)
		}
		if err := c.WaitStable(ctx, out); err != nil {
			t.Fatal(err)
		}
		got, err = c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got); n != 11 || string(got[5].Value) != "third" {
			t.Errorf("after a third transaction: %d records %v, want 11 with partition 0 ending in \"third\"", n, values(got))
		}
		if errs := lg.errs(); len(errs) > 0 {
			t.Errorf("consumer-group errors: %v", errs)
		}
	})
}

// TestTransactionOffsetsWithoutRecords: a transaction that carries consumed
// offsets but no records still commits the offsets. (sarama before 1.61.1
// skipped the offset commit of such a transaction.)
func TestTransactionOffsetsWithoutRecords(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		in, group := c.Unique("in"), c.Unique("group")
		if err := c.CreateTopic(ctx, in, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.ProduceToPartition(ctx, in, 0, msg(in, 0, "a"), msg(in, 0, "b"), msg(in, 0, "c")); err != nil {
			t.Fatal(err)
		}
		lg := joinGroup(t, c, groupConfig(), group, []string{in}, groupHooks{})
		sess := lg.session(ctx, t)
		consumed := lg.take(ctx, t, 3)

		p := newTxnProducer(t, c, txnConfig(c.Unique("txn")))
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		err := p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
			in: {{Partition: 0, Offset: consumed[2].Offset + 1}},
		}, sarama.NewConsumerGroupMetadataFromSession(sess, group, nil))
		if err != nil {
			t.Fatalf("AddOffsetsToTxnWithGroupMetadata: %v", err)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatalf("CommitTxn: %v", err)
		}
		committed, err := c.CommittedOffsets(ctx, group, in)
		if err != nil {
			t.Fatal(err)
		}
		if committed[0] != 3 {
			t.Errorf("committed offset after a transaction with offsets and no records = %d, want 3", committed[0])
		}
		// Offsets committed in a transaction are what a group member gets
		// right after CommitTxn returns, although Kafka writes the commit
		// marker of __consumer_offsets later: a read_committed fetch of the
		// offsets (RequireStable) waits for it.
		for i := int64(0); i < 20; i++ {
			if err := p.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			err := p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
				in: {{Partition: 0, Offset: i % 4}},
			}, sarama.NewConsumerGroupMetadataFromSession(sess, group, nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTxn(); err != nil {
				t.Fatalf("CommitTxn: %v", err)
			}
			committed, err := c.CommittedOffsets(ctx, group, in)
			if err != nil {
				t.Fatal(err)
			}
			if committed[0] != i%4 {
				t.Fatalf("commit %d: committed offset right after CommitTxn = %d, want %d", i, committed[0], i%4)
			}
		}
		// A transaction with nothing at all commits as a no-op.
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatalf("CommitTxn of an empty transaction: %v", err)
		}
	})
}

// TestSaramaVersions runs the exactly-once cycle (consume in a group,
// produce, commit offsets with the session's metadata, read back
// read_committed) with several values of sarama's Config.Version.
// sarama clamps each request to what the broker advertises, so Version is
// a ceiling; the test shows which ceilings work on both brokers.
func TestSaramaVersions(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		for _, v := range []sarama.KafkaVersion{sarama.V2_8_0_0, sarama.V3_9_0_0, sarama.V4_0_0_0, sarama.V4_1_0_0, sarama.MaxVersion} {
			t.Run(v.String(), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				in, out, group := c.Unique("in"), c.Unique("out"), c.Unique("group")
				for _, topic := range []string{in, out} {
					if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.Produce(ctx, in, msg(in, 0, "a"), msg(in, 0, "b")); err != nil {
					t.Fatal(err)
				}
				gcfg := groupConfig()
				gcfg.Version = v
				lg := joinGroup(t, c, gcfg, group, []string{in}, groupHooks{})
				sess := lg.session(ctx, t)
				lg.take(ctx, t, 2)
				pcfg := txnConfig(c.Unique("txn"))
				pcfg.Version = v
				p := newTxnProducer(t, c, pcfg)
				if err := p.BeginTxn(); err != nil {
					t.Fatal(err)
				}
				if err := p.send(ctx, msg(out, 0, "x")); err != nil {
					t.Fatalf("produce: %v", err)
				}
				err := p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
					in: {{Partition: 0, Offset: 2}},
				}, sarama.NewConsumerGroupMetadataFromSession(sess, group, nil))
				if err != nil {
					t.Fatal(err)
				}
				if err := p.CommitTxn(); err != nil {
					t.Fatalf("CommitTxn: %v", err)
				}
				committed, err := c.CommittedOffsets(ctx, group, in)
				if err != nil {
					t.Fatal(err)
				}
				if committed[0] != 2 {
					t.Errorf("committed offset %d, want 2", committed[0])
				}
				ccfg := kafkatest.NewSaramaConfig()
				ccfg.Version = v
				ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
				consumer, err := sarama.NewConsumer(c.Addrs(), ccfg)
				if err != nil {
					t.Fatal(err)
				}
				defer consumer.Close()
				pc, err := consumer.ConsumePartition(out, 0, sarama.OffsetOldest)
				if err != nil {
					t.Fatal(err)
				}
				defer pc.Close()
				select {
				case m := <-pc.Messages():
					if string(m.Value) != "x" {
						t.Errorf("read_committed consumer got %q, want \"x\"", m.Value)
					}
				case err := <-pc.Errors():
					t.Fatalf("read_committed consumer: %v", err)
				case <-ctx.Done():
					t.Fatalf("read_committed consumer: nothing before the timeout")
				}
				if errs := lg.errs(); len(errs) > 0 {
					t.Errorf("consumer-group errors: %v", errs)
				}
			})
		}
	})
}
