package eddy_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestStaleQueryFromARestoringTask holds a task's restore the way production does: a
// transaction of another producer (a previous owner that stalled in a commit) is open
// on its changelog, and a restore waits for it to end before it takes its end offset
// (kread.StableOffsets). The word count runs once and stops, leaving its store file at
// checkpoint c; a count committed to the changelog after c ("zebra") then lies in the
// tail the restore of the next run must read. While the restore is held, GetStale
// answers from the task's store file as it is (source restoring, checkpoint c, each
// word's final count of the first run: the changelog's prefix up to c, without zebra;
// lag unknown, as the restore has not taken its end yet), while Get is ErrNotReady.
// Once the transaction is aborted the restore reads the tail and the task runs: zebra
// is there, from the active task.
func TestStaleQueryFromARestoringTask(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 1)
		e.produce(t, 60)
		cfg := e.config(t)
		first := start(t, e.topo, cfg)
		e.waitCountsWhileRunning(t, first, time.Minute, "the counts")
		if err := first.stop(); err != nil {
			t.Fatal(err)
		}
		changelog := names.ChangelogTopic(e.appID, wordcount.StoreName)
		ends, err := c.EndOffsets(ctxT(t), changelog, sarama.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		count := func(n uint64) sarama.ByteEncoder { return binary.BigEndian.AppendUint64(nil, n) }
		if err := c.Produce(ctxT(t), changelog, &sarama.ProducerMessage{Topic: changelog, Key: sarama.StringEncoder("zebra"), Value: count(7)}); err != nil {
			t.Fatal(err)
		}
		prev := openTxn(t, c, changelog, 0, []byte("zebra"), count(99), time.Minute)

		second := start(t, e.topo, cfg)
		q, err := eddy.Query[string, int64](second.app, wordcount.StoreName)
		if err != nil {
			t.Fatal(err)
		}
		words := slices.Sorted(func(yield func(string) bool) {
			for w := range e.want {
				if !yield(w) {
					return
				}
			}
		})
		var info eddy.StaleInfo
		waitFor(t, 30*time.Second, "a stale read from the restoring task", func() (bool, error) {
			_, _, info, err = q.GetStale(words[0])
			return err == nil && info.Source == eddy.SourceRestoring, nil
		})
		for _, w := range words {
			n, ok, si, err := q.GetStale(w)
			if err != nil || !ok || n != e.want[w] || si != info {
				t.Fatalf("GetStale(%q) while the restore is held: %d %v, %+v, %v; want the first run's count %d from the restoring copy %+v", w, n, ok, si, err, e.want[w], info)
			}
		}
		if info.Checkpoint <= 0 || info.Checkpoint > ends[0] || info.LagRecords != -1 || info.Task.String() != "1_0" {
			t.Errorf("restoring copy: %+v; want task 1_0 at a checkpoint in (0, %d] (the first run's changelog), lag unknown (-1)", info, ends[0])
		}
		if n, ok, si, err := q.GetStale("zebra"); err != nil || ok || si.Source != eddy.SourceRestoring {
			t.Errorf("GetStale(zebra) while the restore is held: %d %v, %+v, %v; want absent (above the checkpoint) from the restoring copy", n, ok, si, err)
		}
		if _, _, err := q.Get(words[0]); !errors.Is(err, eddy.ErrNotReady) {
			t.Errorf("Get while the restore is held: %v; want ErrNotReady", err)
		}
		pairs, infos, err := q.AllStale()
		if err != nil || len(pairs) != len(words) || len(infos) != 1 || infos[0] != info {
			t.Errorf("AllStale while the restore is held: %d pairs, %+v, %v; want the %d words from %+v", len(pairs), infos, err, len(words), info)
		}

		if err := prev.Abort(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "zebra restored and the task running", func() (bool, error) {
			n, ok, si, err := q.GetStale("zebra")
			return err == nil && ok && n == 7 && si.Source == eddy.SourceActive, nil
		})
	})
}
