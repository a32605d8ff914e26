package kvstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// readBoltState reads the state file of dir.
func readBoltState(dir string) (boltState, error) {
	var st boltState
	data, err := os.ReadFile(filepath.Join(dir, BoltStateFileName))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("statestore: state file in %s: %w", dir, err)
	}
	return st, nil
}

// writeBoltState replaces the state file of dir durably: a temporary file, fsynced,
// renamed over the old one, and the directory fsynced. It costs three fsyncs, at open
// and close only.
func writeBoltState(dir string, st boltState) error {
	st.Time = time.Now().UTC()
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, BoltStateFileName)
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("statestore: write %s: %w", tmp, err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("statestore: write %s: %w", name, err)
	}
	return nil
}

// syncDir makes renames and removals in dir durable. Windows cannot fsync a directory
// (NTFS journals renames itself).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("statestore: sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("statestore: sync dir %s: %w", dir, err)
	}
	return nil
}
