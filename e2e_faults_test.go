package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// The broker fails a commit (EndTxn answers UNKNOWN_PRODUCER_ID, which sarama reports
// as abortable): the task aborts, replays its input, and the output stays exact.
func TestBrokerRejectedCommitIsAbortedAndReplayed(t *testing.T) {
	forEachProducerModel(t, testBrokerRejectedCommitIsAbortedAndReplayed)
}

func testBrokerRejectedCommitIsAbortedAndReplayed(t *testing.T, perTask bool) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newWordCount(t, c, 2)
	e.perTask = perTask
	var rejected atomic.Int32
	b.Kfake().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || rejected.Load() >= 3 {
			return nil, nil, false
		}
		b.Kfake().KeepControl()
		rejected.Add(1)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownProducerID.Code
		return resp, nil, true
	})
	in := start(t, e.topo, e.config(t))
	for range 4 {
		e.produce(t, 100)
		time.Sleep(100 * time.Millisecond)
	}
	e.waitCounts(t, time.Minute, "the counts")
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	if rejected.Load() == 0 {
		t.Fatal("no commit was rejected: the test injected nothing")
	}
	e.checkExactlyOnce(t)
}

// valueTopology reads Int64 values and forwards them doubled.
func valueTopology(t *testing.T, in, out string, fail func(int64) error) *topology.Topology {
	b := topology.NewBuilder()
	topology.AddSource(b, "numbers", serde.String(), serde.Int64(), in)
	topology.AddProcessor(b, "double", processor.MapValues[string](func(v int64) (int64, error) {
		if fail != nil {
			if err := fail(v); err != nil {
				return 0, err
			}
		}
		return 2 * v, nil
	}), "numbers")
	topology.AddSink(b, "out", out, serde.String(), serde.Int64(), "double")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func int64Msg(key string, v int64) *sarama.ProducerMessage {
	b, _ := serde.Int64().Serialize("", v)
	return &sarama.ProducerMessage{Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(b)}
}

func TestBadRecordPolicies(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		setup := func() (in, out, dlq string) {
			in, out, dlq = c.Unique("in"), c.Unique("out"), c.Unique("dlq")
			for _, topic := range []string{in, out, dlq} {
				if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			// good, bad (3 bytes is no Int64), good
			bad := &sarama.ProducerMessage{Key: sarama.StringEncoder("bad"), Value: sarama.ByteEncoder([]byte{1, 2, 3})}
			if err := c.ProduceToPartition(ctx, in, 0, int64Msg("a", 1), bad, int64Msg("b", 2)); err != nil {
				t.Fatal(err)
			}
			return in, out, dlq
		}
		waitOutput := func(out string, n int) []*sarama.ConsumerMessage {
			var msgs []*sarama.ConsumerMessage
			waitFor(t, time.Minute, "the output", func() (bool, error) {
				var err error
				msgs, err = c.ReadCommitted(ctx, out)
				return len(msgs) >= n, err
			})
			return msgs
		}

		t.Run("dead-letter", func(t *testing.T) {
			in, out, dlq := setup()
			inst := start(t, valueTopology(t, in, out, nil), eddy.Config{ApplicationID: c.Unique("dlq"), Brokers: c.Addrs(), StateDir: t.TempDir(),
				OnBadRecord: eddy.DeadLetterBadRecord, DeadLetterTopic: dlq})
			waitOutput(out, 2)
			dead := waitOutput(dlq, 1)
			if err := inst.stop(); err != nil {
				t.Fatal(err)
			}
			if len(dead) != 1 || string(dead[0].Key) != "bad" || string(dead[0].Value) != "\x01\x02\x03" {
				t.Fatalf("dead letters: %v", dead)
			}
			h := map[string]string{}
			for _, rh := range dead[0].Headers {
				h[string(rh.Key)] = string(rh.Value)
			}
			if h[eddy.HeaderDeadLetterTopic] != in || h[eddy.HeaderDeadLetterPartition] != "0" || h[eddy.HeaderDeadLetterOffset] != "1" || !strings.Contains(h[eddy.HeaderDeadLetterError], "Int64") {
				t.Fatalf("dead-letter headers: %v", h)
			}
		})
		t.Run("skip", func(t *testing.T) {
			in, out, _ := setup()
			inst := start(t, valueTopology(t, in, out, nil), eddy.Config{ApplicationID: c.Unique("skip"), Brokers: c.Addrs(), StateDir: t.TempDir(),
				OnBadRecord: eddy.SkipBadRecord})
			msgs := waitOutput(out, 2)
			if err := inst.stop(); err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 2 || string(msgs[0].Key) != "a" || string(msgs[1].Key) != "b" {
				t.Fatalf("output: %v", msgs)
			}
		})
		t.Run("fail", func(t *testing.T) {
			in, out, _ := setup()
			inst := start(t, valueTopology(t, in, out, nil), eddy.Config{ApplicationID: c.Unique("fail"), Brokers: c.Addrs(), StateDir: t.TempDir()})
			var err error
			waitFor(t, time.Minute, "the app to stop", func() (bool, error) {
				var done bool
				err, done = inst.exited()
				return done, nil
			})
			var pe *eddy.ProcessError
			if !errors.As(err, &pe) || pe.Node != "numbers" || pe.Record == nil || pe.Record.Offset != 1 || !errors.Is(err, serde.ErrTombstone) && !strings.Contains(err.Error(), "want 8 bytes") {
				t.Fatalf("Run returned %v; want a ProcessError naming source \"numbers\" at offset 1", err)
			}
			t.Logf("error: %v", err)
			// The error says the way out (issue 26: it said what happened only).
			for _, want := range []string{"Config.OnBadRecord", "SkipBadRecord", "DeadLetterBadRecord"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %s: %v", want, err)
				}
			}
			// Nothing past the bad record is committed: the output holds "a" only.
			msgs, rerr := c.ReadCommitted(ctx, out)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if len(msgs) > 1 {
				t.Fatalf("output has %d records; the bad record's successors must not be committed", len(msgs))
			}
		})
	})
}

func TestProcessorErrorStopsTheApp(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		in, out := c.Unique("in"), c.Unique("out")
		for _, topic := range []string{in, out} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.ProduceToPartition(ctx, in, 0, int64Msg("a", 1), int64Msg("b", 13), int64Msg("c", 3)); err != nil {
			t.Fatal(err)
		}
		unlucky := errors.New("13 is unlucky")
		topo := valueTopology(t, in, out, func(v int64) error {
			if v == 13 {
				return unlucky
			}
			return nil
		})
		inst := start(t, topo, eddy.Config{ApplicationID: c.Unique("err"), Brokers: c.Addrs(), StateDir: t.TempDir()})
		var err error
		waitFor(t, time.Minute, "the app to stop", func() (bool, error) {
			var done bool
			err, done = inst.exited()
			return done, nil
		})
		var pe *eddy.ProcessError
		if !errors.Is(err, unlucky) || !errors.As(err, &pe) || pe.Node != "double" || pe.Task.String() != "0_0" || pe.Record == nil || pe.Record.Offset != 1 {
			t.Fatalf("Run returned %v; want the processor's error naming task 0_0, node \"double\", offset 1", err)
		}
		for _, want := range []string{"0_0", `"double"`, "offset 1", in, "Config.OnProcessingError", "SkipBadRecord"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
		if msgs, err := c.ReadCommitted(ctx, out); err != nil || len(msgs) > 1 {
			t.Fatalf("output: %d records (err %v); nothing past the failing record may be committed", len(msgs), err)
		}
	})
}

var _ = fmt.Sprint
var _ = context.Background

// Under at-least-once a failed commit ends the session and the input since the last
// commit is consumed again: nothing is lost (counts may be too high, as documented).
func TestAtLeastOnceReconsumesAfterAFailedCommit(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := e.config(t)
		cfg.Guarantee = eddy.AtLeastOnce
		cfg.CommitInterval = 100 * time.Millisecond
		app, err := eddy.New(e.topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var failures atomic.Int32
		var commits atomic.Int32
		eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
			if commits.Add(1)%4 == 0 && failures.Load() < 3 {
				failures.Add(1)
				return errors.New("injected commit failure")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		for range 4 {
			e.produce(t, 100)
			time.Sleep(200 * time.Millisecond)
		}
		waitFor(t, 2*time.Minute, "every count to reach at least its expected value", func() (bool, error) {
			select {
			case err := <-done:
				return false, fmt.Errorf("Run returned: %v", err)
			default:
			}
			seqs := e.readOutput(t)
			for w, n := range e.want {
				s := seqs[w]
				if len(s) == 0 || s[len(s)-1] < n {
					return false, nil
				}
			}
			return true, nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if failures.Load() == 0 {
			t.Fatal("no commit failed: the test injected nothing")
		}
	})
}

// rewindGroup commits offset 0 for every partition of topics, as a group coordinator
// answering stale committed offsets would make the group resume.
func rewindGroup(t *testing.T, c *kafkatest.Cluster, group string, topics ...string) {
	t.Helper()
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			pom, err := om.ManagePartition(topic, p)
			if err != nil {
				t.Fatal(err)
			}
			pom.ResetOffset(0, "")
			if err := pom.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	om.Commit()
	if err := om.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, topic := range topics {
		waitFor(t, time.Minute, "the rewound offsets", func() (bool, error) {
			got, err := c.CommittedOffsets(ctx, group, topic)
			if err != nil {
				return false, err
			}
			for _, off := range got {
				if off != 0 {
					return false, nil
				}
			}
			return true, nil
		})
	}
}

// When the group coordinator answers committed offsets older than the ones a task
// committed (Kafka 4.1 does, for a while, after a kill -9 of a single node), the task's
// own record of its offsets keeps it from processing committed input again, even on a
// new instance with an empty state dir.
func TestStaleCommittedOffsetsAreNotReprocessed(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		e.produce(t, 200)
		in := start(t, e.topo, e.config(t))
		e.waitCounts(t, time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		rewindGroup(t, c, e.appID, e.input, e.appID+"-words-repartition")
		e.produce(t, 50)
		in = start(t, e.topo, e.config(t)) // a fresh state dir: everything is restored
		e.waitCounts(t, time.Minute, "the counts after the rewind")
		time.Sleep(500 * time.Millisecond) // let a wrongly replayed input show
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		e.checkExactlyOnce(t)
	})
}
