package eddy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/processor"
)

// StateDirLockFile is the file in <StateDir>/<ApplicationID>/ that a running instance
// holds an exclusive flock on; tools reading a state dir check it.
const StateDirLockFile = ".lock"

// lockStateDir takes an exclusive lock on <StateDir>/<ApplicationID>/.lock, so a second
// instance on the same state dir fails at start with a clear error instead of fighting
// over the task files.
func (rt *runtime) lockStateDir() error {
	if err := os.MkdirAll(rt.appDir, 0o755); err != nil {
		return fmt.Errorf("eddy: state dir %q: %w", rt.appDir, err)
	}
	path := filepath.Join(rt.appDir, StateDirLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("eddy: state dir lock %q: %w", path, err)
	}
	locked, err := flock.TryLock(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("eddy: state dir lock %q: %w", path, err)
	}
	if !locked {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		return fmt.Errorf("%w: %s (held by %s); give each instance its own StateDir", ErrStateDirLocked, rt.appDir, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d\n", os.Getpid())
	rt.lockFile = f
	return nil
}

func (rt *runtime) unlockStateDir() {
	if rt.lockFile != nil {
		_ = flock.Unlock(rt.lockFile)
		_ = rt.lockFile.Close()
		rt.lockFile = nil
	}
}

// localState lists the tasks with a store file in the state dir, for the assignor.
func (rt *runtime) localState() []processor.TaskID {
	entries, err := os.ReadDir(rt.appDir)
	if err != nil {
		return nil
	}
	var out []processor.TaskID
	for _, e := range entries {
		if t, err := processor.ParseTaskID(e.Name()); err == nil && e.IsDir() {
			out = append(out, t)
		}
	}
	return out
}

// InstanceIDFile is the file in <StateDir>/<ApplicationID>/ holding the instance's ID,
// made at its first start. The workers' transactional IDs carry it, so an instance
// restarted on the same state dir fences the producers of its previous run and settles
// their open transactions at once, instead of leaving them to time out. Two instances
// must never share one ID: do not copy a state dir to a second running instance.
const InstanceIDFile = "instance.id"

// instanceID reads the instance's ID from the state dir (locked by the caller), making
// it at the first start: 16 random hex digits.
func (rt *runtime) instanceID() (string, error) {
	path := filepath.Join(rt.appDir, InstanceIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if instanceIDPattern.MatchString(id) {
			return id, nil
		}
		rt.logger.Warn("unreadable instance ID; making a new one", "file", path, "content", id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("eddy: instance ID %q: %w", path, err)
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("eddy: instance ID: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("eddy: instance ID %q: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("eddy: instance ID %q: %w", path, err)
	}
	return id, nil
}

var instanceIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)
