package eddy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/topology"
)

// TestStaleQueryFromASuspendedTask holds a rebalance the way a slow member does: two
// word-count instances share the four tasks; the commits of the one not queried (h)
// block (a before-commit hook) and a third instance joins. The queried one (q) ends
// its session, commits and suspends its tasks, and joins again, but the group waits
// for h, which cannot end its session while its commit hangs (up to the rebalance
// timeout, 60 s). While q's counting task is suspended, Get on q is ErrNotReady and
// GetStale answers that task's words from its committed state (its store file and
// the committed changes it holds in memory): source restoring (the source
// of a task assigned here that does not run), lag unknown (-1: a suspended task does
// not read its changelog's end), each count the last one the changelog holds
// below the checkpoint read. Once h's commit is let go, the rebalance completes and
// the counts are exactly once.
func TestStaleQueryFromASuspendedTask(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := func() eddy.Config {
			cfg := e.config(t)
			cfg.MaxWarmupReplicas = -1 // tasks move at once: no probing rebalance to wait for
			// The committed changes stay in memory, not in the store file: a stale read
			// from the suspended task must answer them too. (A fresh-clone CI run failed
			// so with the default, 1 s: q's counting task had committed only within a
			// second of its start, its file had no checkpoint yet, and every stale read
			// was ErrNotReady for the whole rebalance.)
			cfg.StoreWriteInterval = time.Hour
			return cfg
		}
		a, b := startHeld(t, e.topo, cfg()), startHeld(t, e.topo, cfg())
		e.produce(t, 200)
		e.waitCounts(t, 2*time.Minute, "the counts")
		tasks := []string{"0_0", "0_1", "1_0", "1_1"}
		waitFor(t, 2*time.Minute, "a and b running the four tasks", func() (bool, error) {
			return !slices.ContainsFunc(tasks, func(id string) bool { return !runs(a.instance, id) && !runs(b.instance, id) }), nil
		})
		q, h := a, b
		if !runs(a.instance, "1_0") && !runs(a.instance, "1_1") {
			q, h = b, a
		}
		qs, err := eddy.Query[string, int64](q.app, wordcount.StoreName)
		if err != nil {
			t.Fatal(err)
		}
		var task processor.TaskID // a counting task q runs, and its words
		mine := map[string]bool{}
		for w := range e.want {
			_, _, info, err := qs.GetStale(w)
			if err == nil && info.Source == eddy.SourceActive && (len(mine) == 0 || info.Task == task) {
				mine[w], task = true, info.Task
			}
		}
		if len(mine) == 0 {
			t.Fatal("no word is q's: want the words of its counting task")
		}

		h.hold.Store(true)
		e.produce(t, 20)
		select {
		case <-h.held:
		case <-time.After(2 * time.Minute):
			t.Fatal("h did not commit within 2 minutes of new input")
		}
		third := start(t, e.topo, cfg()) // joins: a rebalance, held by h
		suspended := func() bool {
			for _, tv := range q.app.TasksView().Tasks {
				if tv.Task == task.String() && tv.Role == "active" {
					return tv.State == "suspended"
				}
			}
			return false
		}
		var info eddy.StaleInfo
		some := firstKey(mine)
		var seen []string // what q's task did while the test waited, for a failure's message
		waitFor(t, time.Minute, "q's counting task suspended and a stale read from it", func() (bool, error) {
			select {
			case err := <-third.done:
				third.done <- err // for its stop at cleanup
				return false, fmt.Errorf("the third instance stopped: %v", err)
			default:
			}
			_, _, info, err = qs.GetStale(some)
			s := fmt.Sprintf("suspended %v, GetStale %+v %v", suspended(), info, err)
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
				t.Logf("%s: q's task %s: %s", time.Now().Format("15:04:05.000"), task, s)
			}
			return suspended() && err == nil && info.Source == eddy.SourceRestoring, nil
		})
		want := changelogBelow(t, c, e.appID, task.Partition, info.Checkpoint)
		for w := range mine {
			n, ok, si, err := qs.GetStale(w)
			if err != nil || si != info || ok != (want[w] != 0) || n != want[w] {
				t.Errorf("GetStale(%q) from the suspended task: %d %v, %+v, %v; want %d, the changelog's last count below checkpoint %d, from %+v", w, n, ok, si, err, want[w], info.Checkpoint, info)
			}
		}
		if _, _, err := qs.Get(some); !errors.Is(err, eddy.ErrNotReady) {
			t.Errorf("Get(%q) while the task is suspended: %v; want ErrNotReady", some, err)
		}
		if !suspended() {
			t.Fatal("q's counting task left suspended during the reads: the rebalance was not held; the reads may have come from a restore")
		}
		if info.Task != task || info.Checkpoint <= 0 || info.LagRecords != -1 || !info.CurrentAsOf.IsZero() {
			t.Errorf("suspended copy: %+v; want task %s at a checkpoint above 0, lag unknown (-1), no time", info, task)
		}
		h.release()
		e.waitCounts(t, 2*time.Minute, "the counts after the rebalance")
		e.checkExactlyOnce(t)
	})
}

// heldInstance is an instance whose commits block, once hold is set, until release is
// called; held is closed when the first one blocks.
type heldInstance struct {
	*instance
	hold    atomic.Bool
	held    chan struct{}
	release func()
}

// startHeld starts an instance whose commits can be held (heldInstance).
func startHeld(t *testing.T, topo *topology.Topology, cfg eddy.Config) *heldInstance {
	t.Helper()
	app, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldInstance{held: make(chan struct{})}
	let := make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	h.release = func() { releaseOnce.Do(func() { close(let) }) }
	eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
		if h.hold.Load() {
			heldOnce.Do(func() { close(h.held) })
			<-let
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	h.instance = &instance{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- app.Run(ctx) }()
	t.Cleanup(func() { h.release(); _ = h.stop() })
	return h
}

// changelogBelow reads partition p of the word count's changelog up to offset end:
// each word's last count there.
func changelogBelow(t *testing.T, c *kafkatest.Cluster, appID string, p int32, end int64) map[string]int64 {
	t.Helper()
	msgs, err := c.ReadCommitted(ctxT(t), names.ChangelogTopic(appID, wordcount.StoreName))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, m := range msgs {
		if m.Partition == p && m.Offset < end {
			out[string(m.Key)] = int64(binary.BigEndian.Uint64(m.Value))
		}
	}
	return out
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
