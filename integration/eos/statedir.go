//go:build unix

package eos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/processor"
)

// StoreSnapshot is a store as one instance's state dir holds it: its checkpoint (the
// changelog offset it reflects) and its content.
type StoreSnapshot struct {
	Dir           string // the instance's state dir
	Task          string
	Store         string
	Checkpoint    int64
	HasCheckpoint bool
	Content       map[string]int64
}

// ReadStateDir reads every task's stores from an instance's state dir
// (<stateDir>/<app>/<task>/). The instance must not be running. The bbolt file is
// copied and the copy opened, so the state dir stays exactly as the instance left it
// (opening it would change how the next instance finds it).
func ReadStateDir(stateDir, app string) ([]StoreSnapshot, error) {
	appDir := filepath.Join(stateDir, app)
	entries, err := os.ReadDir(appDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eos: read state dir: %w", err)
	}
	var out []StoreSnapshot
	for _, e := range entries {
		id, err := processor.ParseTaskID(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		src := filepath.Join(appDir, e.Name(), kvstore.BoltFileName)
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			continue
		}
		snaps, err := readTaskStores(src, id)
		if err != nil {
			return nil, fmt.Errorf("eos: state dir %s task %s: %w", stateDir, id, err)
		}
		for i := range snaps {
			snaps[i].Dir = stateDir
		}
		out = append(out, snaps...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Store < out[j].Store
	})
	return out, nil
}

// readTaskStores copies a task's bbolt file into a temporary dir and reads the stores
// of its sub-topology from the copy.
func readTaskStores(src string, id processor.TaskID) (_ []StoreSnapshot, err error) {
	tmp, err := os.MkdirTemp("", "eos-snapshot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := copyFile(src, filepath.Join(tmp, kvstore.BoltFileName)); err != nil {
		return nil, err
	}
	b, rep, err := kvstore.OpenBoltReport(tmp, kvstore.BoltOptions{NoSync: true, Verify: kvstore.VerifyAlways})
	if err != nil {
		return nil, fmt.Errorf("open a copy of %s: %w", src, err)
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	if rep.Recreated {
		return nil, fmt.Errorf("%s is damaged: %s", src, rep.Reason)
	}
	var out []StoreSnapshot
	for _, store := range Stores() {
		if StoreSubtopology(store) != id.Subtopology {
			continue
		}
		snap := StoreSnapshot{Task: id.String(), Store: store, Content: map[string]int64{}}
		snap.Checkpoint, snap.HasCheckpoint, err = b.Checkpoint(store)
		if err != nil {
			return nil, err
		}
		it, err := b.Iterate(store, nil, nil)
		if err != nil {
			return nil, err
		}
		for it.Next() {
			v, derr := DecodeInt64(it.Value())
			if derr != nil {
				_ = it.Close()
				return nil, fmt.Errorf("store %s key %q: %w", store, it.Key(), derr)
			}
			snap.Content[string(it.Key())] = v
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}

// checkpoints returns, per "task/store", the checkpoint a state dir holds.
func checkpoints(snaps []StoreSnapshot) map[string]int64 {
	out := map[string]int64{}
	for _, s := range snaps {
		if s.HasCheckpoint {
			out[s.Task+"/"+s.Store] = s.Checkpoint
		}
	}
	return out
}
