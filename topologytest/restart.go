package topologytest

import (
	"errors"
	"fmt"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"path/filepath"
	"time"

	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
)

// ErrOpenTransaction is returned by Restart while records piped under CommitEvery wait
// for their commit: call Commit first (or pipe them again after the restart, as the
// runtime would replay them).
var ErrOpenTransaction = errors.New("topologytest: a transaction is open")

// Restart stops every task as a crash after the last commit would, and starts them
// again with their stores restored from the driver's changelog topics: the runtime's
// recovery on a new instance. Stores in memory restore their whole changelog; stores
// under Config.StateDir keep their files and restore the changelog after their
// checkpoint. What processors keep outside stores starts afresh, as in Kafka Streams
// (a windowed aggregation's observed stream time, punctuation schedules). Topics keep
// their records; output topics read so far stay read.
func (d *Driver) Restart() error {
	if d.closed {
		return fmt.Errorf("topologytest: restart: %w", statestore.ErrClosed)
	}
	if d.tx != nil {
		return ErrOpenTransaction
	}
	var errs []error
	for _, t := range d.tasks {
		errs = append(errs, t.Close())
	}
	for _, s := range d.sets {
		errs = append(errs, s.Close())
	}
	if err := errors.Join(errs...); err != nil {
		d.closed = true
		return fmt.Errorf("topologytest: restart: closing: %w", err)
	}
	d.tasks, d.sets, d.byTopic = nil, nil, map[string]*task.Task{}
	g := graph.Of(d.topo)
	for _, sub := range g.Subtopologies {
		id := processor.TaskID{Subtopology: sub.ID, Partition: 0}
		backend, err := d.openBackend(id)
		if err != nil {
			d.closed = true
			return err
		}
		set := kvstore.NewSet(backend)
		d.sets = append(d.sets, set)
		t, err := task.New(task.Config{
			ID: id, ApplicationID: d.cfg.ApplicationID, Graph: g, Subtopology: sub,
			Stores: set, Collector: (*collector)(d), Logger: d.cfg.Logger,
			Now:                    func() time.Time { return d.wall },
			OnDeserializationError: d.cfg.OnDeserializationError, OnProcessingError: d.cfg.OnProcessingError, DeadLetterTopic: d.cfg.DeadLetterTopic,
		})
		if err != nil {
			d.Close()
			return err
		}
		// Restore through each store's own backend, as the runtime does: a window or
		// session store's routes the records to its time segments.
		for _, st := range sub.Stores {
			if !st.Logged {
				continue
			}
			if err := d.restore(set.Buffer(st.Name).Backend(), st.Name); err != nil {
				t.Close()
				d.Close()
				return err
			}
		}
		d.tasks = append(d.tasks, t)
		for _, topic := range t.SourceTopics() {
			d.byTopic[topic] = t
		}
	}
	for _, t := range d.tasks {
		if err := t.Init(); err != nil {
			d.Close()
			return err
		}
	}
	return nil
}

// restore replays store's changelog after the backend's checkpoint into the backend.
func (d *Driver) restore(backend kvstore.Backend, store string) error {
	from, ok, err := backend.Checkpoint(store)
	if err != nil {
		return fmt.Errorf("topologytest: restore %q: %w", store, err)
	}
	if !ok {
		from = 0
	}
	log := d.topics[d.ChangelogTopic(store)]
	if from >= int64(len(log)) {
		return nil
	}
	entries := make([]kvstore.Entry, 0, len(log)-int(from))
	for _, r := range log[from:] {
		entries = append(entries, kvstore.Entry{Key: r.Key, Value: r.Value})
	}
	if err := backend.Write(kvstore.RestoreBatch(store, entries, int64(len(log)))); err != nil {
		return fmt.Errorf("topologytest: restore %q: %w", store, err)
	}
	return nil
}

// openBackend opens the stores of task id as New does: in memory, or the task's bbolt
// file under Config.StateDir.
func (d *Driver) openBackend(id processor.TaskID) (kvstore.Backend, error) {
	if d.cfg.StateDir == "" {
		return kvstore.NewMemoryBackend(), nil
	}
	return kvstore.OpenBolt(filepath.Join(d.cfg.StateDir, d.cfg.ApplicationID, id.String()), kvstore.BoltOptions{Logger: d.cfg.Logger})
}
