package eddy_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestRepartitionRecordsArePurged checks that repartition topics keep records without
// a time limit and that the reading tasks delete them once committed: the log start
// offset of every partition moves up to (at most) the group's committed offset, and
// the output stays exactly-once.
func TestRepartitionRecordsArePurged(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := e.config(t)
		cfg.RepartitionPurgeInterval = time.Millisecond // after every commit
		repartition := changelog.RepartitionTopicName(e.appID, "words")
		in := start(t, e.topo, cfg)
		for round := range 3 {
			e.produce(t, 100)
			waitFor(t, time.Minute, fmt.Sprintf("the counts of round %d", round), func() (bool, error) {
				if err, done := in.exited(); done {
					return false, fmt.Errorf("app stopped: %v", err)
				}
				return e.complete(t), nil
			})
		}
		// The last records' commit may not have been followed by a purge yet; one
		// more line makes another commit, after which the earlier ones are gone.
		e.produce(t, 1)
		client, err := sarama.NewClient(c.Addrs(), sarama.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		waitFor(t, time.Minute, "the repartition records deleted", func() (bool, error) {
			committed, err := c.CommittedOffsets(ctxT(t), e.appID, repartition)
			if err != nil {
				return false, err
			}
			for p := range int32(2) {
				start, err := client.GetOffset(repartition, p, sarama.OffsetOldest)
				if err != nil {
					return false, err
				}
				if start > committed[p] {
					return false, fmt.Errorf("partition %d: records deleted up to %d, above the committed offset %d", p, start, committed[p])
				}
				if start == 0 {
					return false, nil
				}
			}
			return e.complete(t), nil
		})
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.checkExactlyOnce(t)

		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: repartition})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, en := range entries {
			if en.Name == "retention.ms" {
				found = true
				if en.Value != "-1" {
					t.Errorf("%s has retention.ms %s, want -1 (records are deleted by the purge, never by time)", repartition, en.Value)
				}
			}
		}
		if !found {
			t.Errorf("%s: no retention.ms in its config %v", repartition, entries)
		}
	})
}

// The purge of committed repartition records must never hold up the tasks: the broker
// holds every DeleteRecords until the test lets them go, and meanwhile three rounds of
// input are counted and committed (when each task sent its own DeleteRecords after a
// commit, on its worker's goroutine, the first held one stopped the worker). Once let
// go, the held requests delete the records, and the output is exactly-once.
func TestPurgeDoesNotHoldUpTasks(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newWordCount(t, c, 2)
	cfg := e.config(t)
	cfg.RepartitionPurgeInterval = time.Millisecond // after every commit
	repartition := changelog.RepartitionTopicName(e.appID, "words")
	release := make(chan struct{})
	var held atomic.Int32
	k := b.Kfake()
	k.ControlKey(int16(kmsg.DeleteRecords), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		held.Add(1)
		k.SleepControl(func() { <-release })
		return nil, nil, false // then the broker answers it as usual
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	in := start(t, e.topo, cfg)
	for round := range 3 {
		e.produce(t, 100)
		waitFor(t, 30*time.Second, fmt.Sprintf("the counts of round %d while DeleteRecords is held", round), func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			return e.complete(t), nil
		})
	}
	if held.Load() == 0 {
		t.Fatal("no DeleteRecords reached the broker: the test held nothing")
	}
	close(release)
	released = true
	e.produce(t, 1) // one more commit, one more purge
	client, err := sarama.NewClient(c.Addrs(), sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	waitFor(t, time.Minute, "the repartition records deleted", func() (bool, error) {
		for p := range int32(2) {
			start, err := client.GetOffset(repartition, p, sarama.OffsetOldest)
			if err != nil || start == 0 {
				return false, err
			}
		}
		return e.complete(t), nil
	})
	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	e.checkExactlyOnce(t)
}
