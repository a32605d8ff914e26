package eddy

import (
	"errors"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/processor"
)

// Source says which copy of a store a stale-allowed query read (GetStale).
type Source string

// The copies a stale-allowed query reads, in the order it tries them.
const (
	// SourceActive: the key's task runs here; the answer is its committed state, as
	// Get gives (a global store's local copy counts as active too).
	SourceActive Source = "active"
	// SourceStandby: a standby replica of the key's task (Config.NumStandbyReplicas)
	// here; the answer is its store file as of its checkpoint.
	SourceStandby Source = "standby"
	// SourceRestoring: the key's task is assigned here but does not run: it restores
	// its stores, or waits between two sessions of the group (a rebalance). The answer
	// is its committed state as of its checkpoint: its store file, with the committed
	// changes it holds in memory (Config.StoreWriteInterval) over it.
	SourceRestoring Source = "restoring"
)

// StaleInfo says where a stale-allowed query read its answer and how far that copy was
// behind the store's changelog.
type StaleInfo struct {
	Source Source
	Task   processor.TaskID
	// Checkpoint is the changelog offset the copy read reflects (the next offset it
	// applies): the value and the checkpoint come from one bbolt read transaction (and,
	// for a task that does not run, from its held changes read under their lock), so
	// the answer is the store exactly as of it (standby and restoring; 0 for active).
	Checkpoint int64
	// LagRecords is the changelog offsets from Checkpoint to the changelog's end (its
	// last stable offset) as the copy last read it: a standby reads it every round
	// (about every half second), a restore when it begins. 0 for active; -1 when not
	// known (a restore that has applied nothing yet, a task suspended between sessions:
	// it does not read its changelog's end). Commits
	// since that read are not counted: see CurrentAsOf for a bound in time.
	LagRecords int64
	// CurrentAsOf: the copy holds every change committed to the changelog before this
	// time (a standby: the start of its last round that read to the end). Zero when
	// not known (a restore under way) and for active, whose committed state is current.
	CurrentAsOf time.Time
}

// Lag returns how long before now the copy was last known to hold every committed
// change (now minus CurrentAsOf), and false when that is not known. Active: 0, true.
func (s StaleInfo) Lag() (time.Duration, bool) {
	if s.Source == SourceActive {
		return 0, true
	}
	if s.CurrentAsOf.IsZero() {
		return 0, false
	}
	return time.Since(s.CurrentAsOf), true
}

// GetStale is Get for a caller that accepts a stale answer (Kafka Streams'
// StoreQueryParameters.enableStaleStores): it answers from the key's active task when
// it runs here, else from a standby replica of the task here, else from the task
// restoring here, and says which (StaleInfo) and how far behind its changelog the copy
// read was. A standby or restoring copy answers from its store file as it is, never
// ahead of the changelog's last stable offset: the value and the checkpoint come from
// one bbolt read transaction, so the answer is the store exactly as of
// StaleInfo.Checkpoint. A copy that has read nothing yet (no checkpoint: a first read
// from empty keeps nothing until it ends), or whose file a restore is rebuilding, gives
// an error wrapping ErrNotReady. With no copy here, the errors are Get's (ErrNotLocal
// naming the owner, ErrNotReady).
func (q *QueryableStore[K, V]) GetStale(key K) (V, bool, StaleInfo, error) {
	var zero V
	rt, err := q.app.queryRuntime()
	if err != nil {
		return zero, false, StaleInfo{}, err
	}
	topic := rt.changelogTopic(q.store.Name)
	kb, err := q.serializeKey(topic, key)
	if err != nil {
		return zero, false, StaleInfo{}, err
	}
	vb, info, err := rt.queryGetStale(q.store, kb)
	if err != nil || vb == nil {
		return zero, false, info, err
	}
	v, err := serdes.Deserialize(q.values, topic, vb)
	if err != nil {
		return zero, false, info, err
	}
	return v, true, info, nil
}

// queryGetStale reads key from the freshest local copy of its task's store: the
// running active task, a standby, the task restoring.
func (rt *runtime) queryGetStale(st *graph.Store, key []byte) ([]byte, StaleInfo, error) {
	if st.Global {
		v, err := rt.queryGet(st, key)
		return v, StaleInfo{Source: SourceActive}, err
	}
	id, err := rt.keyTask(st, key)
	if err != nil {
		return nil, StaleInfo{}, err
	}
	t, _, locErr := rt.locate(st, key)
	if t != nil {
		v, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) { return b.Get(st.Name, key) })
		if err == nil || !errors.Is(err, ErrNotReady) {
			return v, StaleInfo{Source: SourceActive, Task: id}, err
		}
	}
	if sb := rt.standbyOf(id); sb != nil {
		return sb.getStale(st.Name, key)
	}
	if t != nil {
		return t.getRestoring(st.Name, key)
	}
	return nil, StaleInfo{}, locErr
}

// standbyOf returns the standby replica of task id here, or nil.
func (rt *runtime) standbyOf(id processor.TaskID) *standbyTask {
	rt.standbys.mu.Lock()
	defer rt.standbys.mu.Unlock()
	return rt.standbys.tasks[id]
}

// publish makes the standby's open store file readable by stale queries (nil: it is
// about to close; the call waits for the reads under way).
func (s *standbyTask) publish(file kvstore.Backend) {
	s.fileMu.Lock()
	s.file = file
	s.fileMu.Unlock()
}

// progress records the end a standby's round reads up to, as it reads.
func (s *standbyTask) progress(p restore.Progress) {
	s.mu.Lock()
	s.ends[p.Store] = p.End
	s.mu.Unlock()
}

// storeCurrent is, for one store of a standby, the end its last finished round reached
// and when that round began.
type storeCurrent struct {
	end  int64
	asOf time.Time
}

// getStale reads key from the standby's store file.
func (s *standbyTask) getStale(store string, key []byte) ([]byte, StaleInfo, error) {
	var v []byte
	info, err := s.readStale(store, func(b kvstore.Backend) (snap kvstore.Snapshot, err error) {
		v, snap, err = kvstore.GetAt(b, store, key)
		return snap, err
	})
	return v, info, err
}

// readStale runs a snapshot read on the standby's store file.
func (s *standbyTask) readStale(store string, read func(kvstore.Backend) (kvstore.Snapshot, error)) (StaleInfo, error) {
	info := StaleInfo{Source: SourceStandby, Task: s.id}
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.file == nil {
		return info, fmt.Errorf("%w: store %q: the standby of task %s has not opened its store file", ErrNotReady, store, s.id)
	}
	snap, err := read(s.file)
	if err := snapshotUsable(store, s.id, snap, err); err != nil {
		return info, err
	}
	s.mu.Lock()
	end, cur := s.ends[store], s.current[store]
	s.mu.Unlock()
	info.Checkpoint, info.LagRecords = snap.Checkpoint, max(0, end-snap.Checkpoint)
	if !cur.asOf.IsZero() && snap.Checkpoint >= cur.end {
		info.CurrentAsOf = cur.asOf
	}
	return info, nil
}

// getRestoring reads key from the store file of a task that is assigned here but not
// running (restoring, or suspended between sessions).
func (t *taskRunner) getRestoring(store string, key []byte) ([]byte, StaleInfo, error) {
	var v []byte
	info, err := t.readRestoring(store, func(b kvstore.Backend) (snap kvstore.Snapshot, err error) {
		v, snap, err = kvstore.GetAt(b, store, key)
		return snap, err
	})
	return v, info, err
}

// readRestoring runs a snapshot read on the committed state of a task that does not run:
// its store file with the committed changes the task holds in memory over it
// (kvstore.Buffer.ReadCommittedSnapshot; a suspended task may hold some, and its file
// may have no checkpoint yet).
func (t *taskRunner) readRestoring(store string, read func(kvstore.Backend) (kvstore.Snapshot, error)) (StaleInfo, error) {
	info := StaleInfo{Source: SourceRestoring, Task: t.id}
	t.queryMu.RLock()
	defer t.queryMu.RUnlock()
	st := taskState(t.state.Load())
	if t.set == nil || st == taskClosed || t.set.Buffer(store) == nil {
		return info, fmt.Errorf("%w: store %q of task %s is %s and not open", ErrNotReady, store, t.id, st)
	}
	snap, err := t.set.Buffer(store).ReadCommittedSnapshot(read)
	if err := snapshotUsable(store, t.id, snap, err); err != nil {
		return info, err
	}
	t.restoreMu.Lock()
	end, ok := t.restoreEnd[store]
	t.restoreMu.Unlock()
	info.Checkpoint, info.LagRecords = snap.Checkpoint, -1
	if ok && st == taskRestoring {
		info.LagRecords = max(0, end-snap.Checkpoint)
	}
	return info, nil
}

// snapshotUsable turns a snapshot read's failure, or a store with no checkpoint yet
// (nothing read, or a first read from empty under way), into an error wrapping
// ErrNotReady.
func snapshotUsable(store string, id processor.TaskID, snap kvstore.Snapshot, err error) error {
	switch {
	case errors.Is(err, kvstore.ErrBusy):
		return fmt.Errorf("%w: store %q of task %s: %w", ErrNotReady, store, id, err)
	case err != nil:
		return err
	case !snap.HasCheckpoint:
		return fmt.Errorf("%w: store %q of task %s has read none of its changelog yet", ErrNotReady, store, id)
	}
	return nil
}
