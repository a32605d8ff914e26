package kafkatest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// staleProduceError is the error a fenced transactional producer gets when
// it produces to a partition it had already added to its (since aborted)
// transaction. Kafka checks the epoch first; kfake finds no open
// transaction for the partition first. sarama treats both as abortable:
// the producer only learns that it is fenced when it aborts.
func staleProduceError(cluster string) sarama.KError {
	if cluster == kafkatest.EmbeddedName {
		return sarama.ErrInvalidTxnState
	}
	return sarama.ErrInvalidProducerEpoch
}

// TestFencing: a second producer with the same transactional ID fences the
// first, aborts its open transaction, and everything the first does after
// that fails; nothing it wrote becomes visible to read_committed readers.
func TestFencing(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		out := c.Unique("out")
		if err := c.CreateTopic(ctx, out, 2, nil); err != nil {
			t.Fatal(err)
		}

		t.Run("produce then commit", func(t *testing.T) {
			id := c.Unique("txn")
			zombie := newTxnProducer(t, c, txnConfig(id))
			if err := zombie.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			if err := zombie.send(ctx, msg(out, 0, "zombie-before-fence")); err != nil {
				t.Fatal(err)
			}
			// The new producer's InitProducerId bumps the epoch and aborts
			// the zombie's open transaction.
			successor := newTxnProducer(t, c, txnConfig(id))

			err := zombie.send(ctx, msg(out, 0, "zombie-after-fence"))
			want := staleProduceError(c.Name())
			if !errors.Is(err, want) {
				t.Errorf("zombie produce after fence: %v, want %v (%d)", err, want, want)
			}
			if st := zombie.TxnStatus(); st&sarama.ProducerTxnFlagAbortableError == 0 {
				t.Errorf("zombie status after the produce error: %s, want abortable", st)
			}
			// CommitTxn in an error state returns the last error without
			// asking the broker.
			if err := zombie.CommitTxn(); !errors.Is(err, want) {
				t.Errorf("zombie CommitTxn: %v, want %v", err, want)
			}
			// AbortTxn asks the broker, which answers PRODUCER_FENCED: fatal.
			if err := zombie.AbortTxn(); !errors.Is(err, sarama.ErrProducerFenced) {
				t.Errorf("zombie AbortTxn: %v, want ErrProducerFenced", err)
			}
			if st := zombie.TxnStatus(); st&sarama.ProducerTxnFlagFatalError == 0 {
				t.Errorf("zombie status after AbortTxn: %s, want fatal", st)
			}
			if err := zombie.BeginTxn(); err == nil {
				t.Errorf("zombie BeginTxn after a fatal error succeeded")
			}

			// The successor works.
			if err := successor.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			if err := successor.send(ctx, msg(out, 0, "successor")); err != nil {
				t.Fatal(err)
			}
			if err := successor.CommitTxn(); err != nil {
				t.Fatalf("successor CommitTxn: %v", err)
			}
		})

		t.Run("commit only", func(t *testing.T) {
			// Fenced with no produce in between: CommitTxn itself reports
			// PRODUCER_FENCED, fatal.
			id := c.Unique("txn")
			zombie := newTxnProducer(t, c, txnConfig(id))
			if err := zombie.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			if err := zombie.send(ctx, msg(out, 1, "zombie-commit-only")); err != nil {
				t.Fatal(err)
			}
			_ = newTxnProducer(t, c, txnConfig(id))
			err := zombie.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{
				out: {{Partition: 0, Offset: 1}},
			}, c.Unique("group"))
			if err != nil {
				t.Errorf("AddOffsetsToTxn is local until the commit, got %v", err)
			}
			if err := zombie.CommitTxn(); !errors.Is(err, sarama.ErrProducerFenced) {
				t.Errorf("zombie CommitTxn: %v, want ErrProducerFenced", err)
			}
			if st := zombie.TxnStatus(); st&sarama.ProducerTxnFlagFatalError == 0 {
				t.Errorf("zombie status after CommitTxn: %s, want fatal", st)
			}
		})

		t.Run("timed out", func(t *testing.T) {
			// A transaction left open past its timeout is aborted by the
			// broker, which bumps the epoch: the producer is fenced as if
			// another had taken its ID.
			cfg := txnConfig(c.Unique("txn"))
			cfg.Producer.Transaction.Timeout = time.Second
			hung := newTxnProducer(t, c, cfg)
			if err := hung.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			if err := hung.send(ctx, msg(out, 1, "hung")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := c.WaitStable(ctx, out); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: a transaction with a 1 s timeout was aborted after %v", c.Name(), time.Since(start).Round(10*time.Millisecond))
			if err := hung.CommitTxn(); !errors.Is(err, sarama.ErrProducerFenced) {
				t.Errorf("CommitTxn after the broker aborted the transaction: %v, want ErrProducerFenced", err)
			}
		})

		if err := c.WaitStable(ctx, out); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if vals := values(got); !slices.Equal(vals, []string{"successor"}) {
			t.Errorf("read_committed sees %v, want only [successor]", vals)
		}
	})
}

// TestGroupFencing: TxnOffsetCommit v3 carries the member ID and generation
// (KIP-447), and the group coordinator refuses offsets from a stale member.
// The errors are abortable: after AbortTxn the producer works again.
func TestGroupFencing(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		in, out, group := c.Unique("in"), c.Unique("out"), c.Unique("group")
		for _, topic := range []string{in, out} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Produce(ctx, in, msg(in, 0, "a")); err != nil {
			t.Fatal(err)
		}
		lg := joinGroup(t, c, groupConfig(), group, []string{in}, groupHooks{})
		sess := lg.session(ctx, t)
		live := sarama.NewConsumerGroupMetadataFromSession(sess, group, nil)
		p := newTxnProducer(t, c, txnConfig(c.Unique("txn")))
		for _, tc := range []struct {
			name string
			meta *sarama.ConsumerGroupMetadata
			want error
		}{
			{"stale generation", &sarama.ConsumerGroupMetadata{GroupID: group, GenerationID: live.GenerationID - 1, MemberID: live.MemberID}, sarama.ErrIllegalGeneration},
			{"unknown member", &sarama.ConsumerGroupMetadata{GroupID: group, GenerationID: live.GenerationID, MemberID: "not-a-member"}, sarama.ErrUnknownMemberId},
			{"no member (no fencing)", sarama.NewConsumerGroupMetadata(group), nil},
			{"live member", live, nil},
		} {
			if err := p.BeginTxn(); err != nil {
				t.Fatalf("%s: BeginTxn: %v", tc.name, err)
			}
			if err := p.send(ctx, msg(out, 0, tc.name)); err != nil {
				t.Fatalf("%s: produce: %v", tc.name, err)
			}
			if err := p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{in: {{Partition: 0, Offset: 1}}}, tc.meta); err != nil {
				t.Fatalf("%s: AddOffsetsToTxnWithGroupMetadata: %v", tc.name, err)
			}
			err := p.CommitTxn()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("%s: CommitTxn: %v", tc.name, err)
				}
				continue
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: CommitTxn: %v, want %v", tc.name, err, tc.want)
			}
			if st := p.TxnStatus(); st&sarama.ProducerTxnFlagAbortableError == 0 {
				t.Errorf("%s: status %s, want abortable", tc.name, st)
			}
			if err := p.AbortTxn(); err != nil {
				t.Fatalf("%s: AbortTxn: %v", tc.name, err)
			}
		}
		if err := c.WaitStable(ctx, out); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if vals := values(got); !slices.Equal(vals, []string{"no member (no fencing)", "live member"}) {
			t.Errorf("read_committed sees %q, want the two committed transactions", vals)
		}
	})
}
