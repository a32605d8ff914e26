package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
)

// taskOffsets reports a task dir left from earlier by the checkpoints in its file (the
// counts store's: the word count's one kept store), and leaves out a dir without
// checkpoints and the tasks without kept stores.
func TestTaskOffsetsReadsLeftTaskDirs(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	g := graph.Of(topo)
	dir := t.TempDir()
	rt := &runtime{g: g, appDir: dir, registry: newTaskRegistry(), logger: slog.New(slog.DiscardHandler), assignor: newAssignor(g, "app")}
	be, err := kvstore.OpenBolt(filepath.Join(dir, "1_1"), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Write(kvstore.Batch{Writes: map[string][]kvstore.Entry{wordcount.StoreName: {{Key: []byte("fox"), Value: make([]byte, 8)}}}, Checkpoints: map[string]int64{wordcount.StoreName: 42}}); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	empty, err := kvstore.OpenBolt(filepath.Join(dir, "1_2"), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "0_1"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := rt.taskOffsets()
	want := map[processor.TaskID]int64{{Subtopology: 1, Partition: 1}: 42}
	if !maps.Equal(got, want) {
		t.Fatalf("taskOffsets() = %v; want %v", got, want)
	}
}

// A standby holds its task's store file while it is assigned, and reconcileStandbys
// returns only once a standby no longer assigned (revoked, or promoted to active here)
// has closed it: the task that opens the file next must not find it locked.
func TestStandbyRevokedReleasesItsFile(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	g := graph.Of(topo)
	c := kafkatest.Embedded(t)
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dir := t.TempDir()
	rt := &runtime{g: g, appDir: dir, registry: newTaskRegistry(), logger: slog.New(slog.DiscardHandler),
		assignor: newAssignor(g, "app"), cfg: Config{ApplicationID: c.Unique("app")}}
	rt.restoreProto = &restore.Restorer{Client: client, Logger: rt.logger, StableWait: time.Second}
	if err := c.CreateTopic(ctxTest(t), names.ChangelogTopic(rt.cfg.ApplicationID, wordcount.StoreName), 1, nil); err != nil {
		t.Fatal(err)
	}
	id := processor.TaskID{Subtopology: 1, Partition: 0}
	taskDir := filepath.Join(dir, id.String())
	for round := range 3 {
		rt.reconcileStandbys([]processor.TaskID{id})
		// The changelog is empty: the standby reads it every 500 ms, its file open.
		waitUntil(t, "the standby opening its file", func() bool {
			_, err := kvstore.ReadCheckpoints(taskDir, kvstore.InspectOptions{LockTimeout: time.Millisecond})
			return errors.Is(err, statestore.ErrLocked)
		})
		if infos := rt.standbyInfos(); len(infos) != 1 || infos[0].ID != id {
			t.Fatalf("round %d: standbys %v; want one of %s", round, infos, id)
		}
		began := time.Now()
		rt.reconcileStandbys(nil)
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("round %d: stopping the standby took %v; a rebalance waits for it", round, took)
		}
		// One attempt, no wait: the file must be free the moment reconcile returns.
		if !tryLock(t, taskDir) {
			t.Fatalf("round %d: right after the standby was revoked its file is still held", round)
		}
		if infos := rt.standbyInfos(); len(infos) != 0 {
			t.Fatalf("round %d: standbys %v after revoking every one", round, infos)
		}
	}
	if _, err := os.Stat(taskDir); err != nil {
		t.Fatal(err)
	}
}

// tryLock takes and releases the task dir's lock in one attempt.
func tryLock(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, kvstore.BoltLockFileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ok, err := flock.TryLock(f)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		_ = flock.Unlock(f)
	}
	return ok
}

func ctxTest(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A standby tailing a changelog that grows all the time (input flowing, a commit every
// 100 ms) is caught up as of the start of its last round: every round reads to the end
// it finds, so it shows as running and its age stays about a round. Before, caught up
// meant "a round found nothing to read", which never happened while records kept
// coming: the standby stayed "restoring" and its age unset, and
// TestStandbyTakesOverWithTheTail timed out in CI whenever the standbys started after
// its input began to flow.
func TestStandbyCaughtUpWhileItsChangelogGrows(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	g := graph.Of(topo)
	c := kafkatest.Embedded(t)
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rt := &runtime{g: g, appDir: t.TempDir(), registry: newTaskRegistry(), logger: slog.New(slog.DiscardHandler),
		assignor: newAssignor(g, "app"), cfg: Config{ApplicationID: c.Unique("app")}}
	rt.restoreProto = &restore.Restorer{Client: client, Logger: rt.logger, StableWait: time.Second}
	topic := names.ChangelogTopic(rt.cfg.ApplicationID, wordcount.StoreName)
	if err := c.CreateTopic(ctxTest(t), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	// A record every 20 ms from before the standby starts until the test ends: no
	// round of the standby (every 500 ms) can find its changelog without new records.
	ctx, stop := context.WithCancel(context.Background())
	produced := make(chan error, 1)
	var n int64
	go func() {
		for i := 0; ; i++ {
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("w%d", i%50)), Value: sarama.ByteEncoder(make([]byte, 8))}
			if err := c.Produce(ctx, topic, msg); err != nil {
				produced <- err
				return
			}
			atomic.AddInt64(&n, 1)
			select {
			case <-ctx.Done():
				produced <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() {
		stop()
		if err := <-produced; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	waitUntil(t, "the first records on the changelog", func() bool { return atomic.LoadInt64(&n) > 0 })
	started := time.Now()
	id := processor.TaskID{Subtopology: 1, Partition: 0}
	rt.reconcileStandbys([]processor.TaskID{id})
	defer rt.reconcileStandbys(nil)
	// Three finished rounds: every one found records to read, the producer never stopped.
	var sb standbyInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		infos := rt.standbyInfos()
		if len(infos) != 1 {
			t.Fatalf("standbys %v; want one of %s", infos, id)
		}
		if sb = infos[0]; sb.Rounds >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby finished %d rounds in a minute (last error %v)", sb.Rounds, sb.Err)
		}
	}
	if sb.Restored == 0 {
		t.Fatalf("the standby applied no records in %d rounds", sb.Rounds)
	}
	if sb.CaughtUp.IsZero() || sb.CaughtUp.Before(started) {
		t.Fatalf("after %d rounds that each read the changelog to its end (%d records applied), the standby's caught-up time is %v (started %v); want the start of its last round", sb.Rounds, sb.Restored, sb.CaughtUp, started)
	}
	if view := sb.view(rt); view.Role != "standby" || view.State != "running" {
		t.Fatalf("/tasks shows the standby as %q %q; want standby running", view.Role, view.State)
	}
}
