package eddy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/processor"
)

// standbyPollInterval is how long a standby replica waits, once caught up, before it
// reads its changelogs again. Each round costs two ListOffsets per store and a fetch
// when there is something to read; half a second keeps a standby within about a
// second of its active task (whose commits come every 100 ms) at little cost.
const standbyPollInterval = 500 * time.Millisecond

// standbyTask is a standby replica of a task (Config.NumStandbyReplicas, Kafka Streams'
// StandbyTask): its goroutine opens the task's store file in this instance's state dir
// and tails the changelogs of the stores a standby keeps (standbyKeeps) into it, with
// the restore's own code in tail mode (restore.Restorer.Tail: read_committed, up to the
// last stable offset, each write with the checkpoint it reaches). It processes no
// input, runs no processor, has no producer, writes nothing to Kafka and takes no part
// in any commit (it is not in worker.tasks). When the task comes to this instance as an
// active task, the standby is stopped first (onAssignment, before the task opens the
// file) and the task restores only the tail after the standby's checkpoints.
type standbyTask struct {
	id     processor.TaskID
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// lag is each store's changelog offsets left to read at the start of the last
	// round (last stable offset minus checkpoint); checkpoint the offset each store
	// reached; restored counts the changelog records applied since the standby began.
	lag        map[string]int64
	checkpoint map[string]int64
	restored   int64
	// caughtUp is when the last finished round began: it read every store to its
	// changelog's end (last stable offset) as it found it, so the standby holds every
	// change committed before then (behind an open transaction: up to its first
	// record). Not "the last round that found nothing to read": with input flowing, a
	// round every standbyPollInterval always finds the commits made since the last
	// one, so the replica never showed as caught up (state restoring, its age metric
	// growing without bound) while it trailed by half a second — and a test waiting
	// for a caught-up standby timed out in CI whenever its standbys started after the
	// input began to flow. rounds counts finished rounds.
	caughtUp time.Time
	rounds   int64
	err      error // the last round's failure, nil once a round succeeds
	// ends is each store's changelog end (last stable offset) as last read, updated as
	// a round reads; current is, per store, the end the last finished round reached and
	// when that round began: the store holds every change committed before then.
	ends    map[string]int64
	current map[string]storeCurrent

	// fileMu guards file, the open store file that stale queries read (querystale.go),
	// against its closing.
	fileMu sync.RWMutex
	file   kvstore.Backend
}

// standbyInfo is what /tasks and the metrics show of a standby.
type standbyInfo struct {
	ID          processor.TaskID
	Lag         map[string]int64
	Checkpoints map[string]int64
	Restored    int64
	CaughtUp    time.Time
	Rounds      int64
	Err         error
}

func (s *standbyTask) info() standbyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return standbyInfo{ID: s.id, Lag: maps.Clone(s.lag), Checkpoints: maps.Clone(s.checkpoint), Restored: s.restored, CaughtUp: s.caughtUp, Rounds: s.rounds, Err: s.err}
}

// standbys is the instance's set of standby replicas.
type standbys struct {
	mu    sync.Mutex
	tasks map[processor.TaskID]*standbyTask
}

// reconcileStandbys makes the running standbys the assigned ones: it stops (and waits
// for) those not assigned any more — a standby promoted to active among them, so its
// store file is closed before the task opens it — and starts the new ones.
func (rt *runtime) reconcileStandbys(assigned []processor.TaskID) {
	rt.standbys.mu.Lock()
	if rt.standbys.tasks == nil {
		rt.standbys.tasks = map[processor.TaskID]*standbyTask{}
	}
	var stopping []*standbyTask
	for id, s := range rt.standbys.tasks {
		if !slices.Contains(assigned, id) {
			stopping = append(stopping, s)
			delete(rt.standbys.tasks, id)
		}
	}
	var started []processor.TaskID
	if !rt.stopping.Load() {
		for _, id := range assigned {
			if _, ok := rt.standbys.tasks[id]; !ok {
				rt.standbys.tasks[id] = rt.startStandby(id)
				started = append(started, id)
			}
		}
	}
	rt.standbys.mu.Unlock()
	for _, s := range stopping {
		s.stop()
	}
	if len(stopping) > 0 || len(started) > 0 {
		closed := make([]processor.TaskID, 0, len(stopping))
		for _, s := range stopping {
			closed = append(closed, s.id)
		}
		rt.logger.Info("standby replicas", "standby", assigned, "started", started, "stopped", closed)
	}
}

// stopStandbys stops every standby (the instance stops).
func (rt *runtime) stopStandbys() {
	rt.standbys.mu.Lock()
	all := rt.standbys.tasks
	rt.standbys.tasks = nil
	rt.standbys.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
}

// standbyInfos returns what the running standbys report, sorted by task.
func (rt *runtime) standbyInfos() []standbyInfo {
	rt.standbys.mu.Lock()
	all := make([]*standbyTask, 0, len(rt.standbys.tasks))
	for _, s := range rt.standbys.tasks {
		all = append(all, s)
	}
	rt.standbys.mu.Unlock()
	out := make([]standbyInfo, 0, len(all))
	for _, s := range all {
		out = append(out, s.info())
	}
	slices.SortFunc(out, func(a, b standbyInfo) int { return compareTasks(a.ID, b.ID) })
	return out
}

// stop ends the standby's goroutine and waits until its store file is closed. A round
// under way is interrupted: a tail read keeps what it wrote (with its checkpoint), a
// first read from empty in key order keeps nothing (the store stays empty).
func (s *standbyTask) stop() {
	s.cancel()
	<-s.done
}

// startStandby starts the standby of task id.
func (rt *runtime) startStandby(id processor.TaskID) *standbyTask {
	ctx, cancel := context.WithCancel(context.Background())
	s := &standbyTask{
		id: id, logger: rt.logger.With("task", id.String(), "standby", true),
		cancel: cancel, done: make(chan struct{}),
		lag: map[string]int64{}, checkpoint: map[string]int64{},
		ends: map[string]int64{}, current: map[string]storeCurrent{},
	}
	go func() {
		defer close(s.done)
		s.run(ctx, rt)
	}()
	return s
}

// standbyStore is one store a standby keeps: its name, changelog and backend (the
// task's file, or a segmented layer over it for a window or session store).
type standbyStore struct {
	name, topic string
	backend     kvstore.Backend
}

// run is the standby's goroutine: open the store file, then read the changelogs in
// rounds until ctx ends. Failures (the file locked a moment longer by a task closing,
// a broker away) are logged and retried with backoff: a standby never stops the
// application.
func (s *standbyTask) run(ctx context.Context, rt *runtime) {
	sub := rt.g.Subtopologies[s.id.Subtopology]
	var b backoff.Backoff
	var file kvstore.Backend
	var stores []standbyStore
	for ctx.Err() == nil {
		var err error
		file, stores, err = s.open(rt, sub)
		if err == nil {
			break
		}
		s.fail(err)
		_ = backoff.Sleep(ctx, b.Next())
	}
	if file == nil {
		return
	}
	s.publish(file)
	defer func() {
		s.publish(nil)
		if err := file.Close(); err != nil {
			s.logger.Warn("closing the standby's store file", "error", err)
		}
	}()
	b.Reset()
	for ctx.Err() == nil {
		err := s.round(ctx, rt, stores)
		if ctx.Err() != nil {
			return
		}
		wait := standbyPollInterval
		if err != nil {
			s.fail(err)
			wait = b.Next()
		} else {
			b.Reset()
		}
		if backoff.Sleep(ctx, wait) != nil {
			return
		}
	}
}

func (s *standbyTask) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	s.logger.Warn("standby replica: reading the changelogs failed; retrying", "error", err)
}

// open opens the task's store file and the stores a standby keeps.
func (s *standbyTask) open(rt *runtime, sub *graph.Subtopology) (kvstore.Backend, []standbyStore, error) {
	file, rep, err := kvstore.OpenBoltReport(filepath.Join(rt.appDir, s.id.String()), kvstore.BoltOptions{NoSync: rt.cfg.StoreNoSync, Logger: s.logger})
	if err != nil {
		return nil, nil, fmt.Errorf("standby of task %s: open state: %w", s.id, err)
	}
	if rep.Recreated {
		s.logger.Warn("store file not usable; the standby starts empty and reads the changelogs from their start", "reason", rep.Reason, "moved_to", rep.MovedTo)
	}
	var stores []standbyStore
	for _, st := range sub.Stores {
		if !standbyKeeps(st) {
			continue
		}
		be := file
		if st.Segments != nil {
			spec := *st.Segments
			spec.NoRebuild = false // the changelog rebuilds it
			seg := kvstore.NewSegmented(file, st.Name, spec)
			changed, err := seg.Open()
			if err != nil {
				_ = file.Close()
				return nil, nil, fmt.Errorf("standby of task %s: store %q: %w", s.id, st.Name, err)
			}
			if changed != nil {
				s.logger.Warn(storeRebuildStandbyMsg, "store", st.Name, "change", changed.String())
			}
			be = seg
		}
		stores = append(stores, standbyStore{name: st.Name, topic: names.ChangelogTopic(rt.cfg.ApplicationID, st.Name), backend: be})
	}
	return file, stores, nil
}

const storeRebuildStandbyMsg = "the store's segments were cut with another retention; the standby reads its changelog again from the start"

// round reads every store's changelog from its checkpoint to the last stable offset.
func (s *standbyTask) round(ctx context.Context, rt *runtime, stores []standbyStore) error {
	roundBegan := time.Now()
	for _, st := range stores {
		r := rt.restorer()
		r.Tail = true
		r.Logger = quiet(s.logger)
		r.OnProgress = s.progress
		began := time.Now()
		res, err := r.Restore(ctx, st.backend, st.name, st.topic, s.id.Partition)
		s.mu.Lock()
		s.restored += res.Records
		if err == nil {
			s.lag[st.name] = res.To - res.From
			s.checkpoint[st.name] = res.To
			s.ends[st.name] = res.To
			s.current[st.name] = storeCurrent{end: res.To, asOf: began}
		}
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("standby of task %s: changelog %q partition %d: %w", s.id, st.topic, s.id.Partition, err)
		}
	}
	s.mu.Lock()
	s.err = nil
	s.rounds++
	s.caughtUp = roundBegan
	s.mu.Unlock()
	return nil
}
