package eddy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// TestTasksRoute: GET /tasks shows each task of the instance with its state, the
// instance, its store's changelog checkpoint (caught up with the changelog once the
// store file is written) and its input lag, and the generation.
func TestTasksRoute(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := e.config(t)
		cfg.InstanceID = e.appID + "-0"
		cfg.StoreWriteInterval = 200 * time.Millisecond
		in := start(t, e.topo, cfg)
		srv := httptest.NewServer(in.app.Handler())
		t.Cleanup(srv.Close)
		e.produce(t, 200)
		e.waitCountsWhileRunning(t, in, time.Minute, "the counts")
		topic := changelog.TopicName(e.appID, wordcount.StoreName)
		var view eddy.TasksView
		waitFor(t, time.Minute, "the store checkpoints at the changelog's end", func() (bool, error) {
			code, _, body := do(t, "GET", srv.URL+"/tasks", nil, "")
			if code != http.StatusOK {
				t.Fatalf("GET /tasks: %d %s", code, body)
			}
			view = eddy.TasksView{}
			if err := json.Unmarshal([]byte(body), &view); err != nil {
				t.Fatalf("GET /tasks: %v in %s", err, body)
			}
			ends, err := c.EndOffsets(ctxT(t), topic, sarama.ReadUncommitted)
			if err != nil {
				return false, err
			}
			caught := 0
			for _, tv := range view.Tasks {
				id, err := processor.ParseTaskID(tv.Task)
				if err != nil {
					t.Fatalf("GET /tasks: task %q: %v", tv.Task, err)
				}
				for _, sv := range tv.Stores {
					// The end is past the last commit marker; the checkpoint is the
					// offset after the last record, so one below the end at most.
					if sv.Checkpoint != nil && *sv.Checkpoint > 0 && ends[id.Partition]-*sv.Checkpoint <= 1 {
						caught++
					}
				}
			}
			if caught == 2 {
				return true, nil
			}
			// A store's changes are written with its checkpoint at the first commit
			// StoreWriteInterval after the last write: give the tasks one.
			e.produce(t, 1)
			return false, nil
		})
		t.Logf("GET /tasks: %+v", view)
		if view.State != eddy.StateRunning || view.Instance != cfg.InstanceID || view.GroupInstanceID != cfg.InstanceID ||
			len(view.StateDirInstanceID) != 16 || view.Generation <= 0 || len(view.Tasks) != 4 {
			t.Fatalf("GET /tasks: %+v; want running, instance %q, a state dir instance ID, a generation, 4 tasks", view, cfg.InstanceID)
		}
		for _, tv := range view.Tasks {
			if tv.State != "running" || tv.Role != "active" || tv.Instance != cfg.InstanceID {
				t.Errorf("task %+v: want an active running task of instance %q", tv, cfg.InstanceID)
			}
			if _, ok := tv.InputLag[e.input]; tv.Task[0] == '0' && !ok {
				t.Errorf("task %s: no input lag for %s: %v", tv.Task, e.input, tv.InputLag)
			}
			wantStores := 0
			if tv.Task[0] == '1' {
				wantStores = 1
			}
			if len(tv.Stores) != wantStores {
				t.Errorf("task %s: stores %+v, want %d", tv.Task, tv.Stores, wantStores)
			}
			for _, sv := range tv.Stores {
				if sv.Store != wordcount.StoreName || sv.Changelog != topic {
					t.Errorf("task %s: store %+v, want %s with changelog %s", tv.Task, sv, wordcount.StoreName, topic)
				}
			}
		}
	})
}
