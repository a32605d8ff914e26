package kvstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/statestore"
)

// inspectFixture writes a task file: store "a" with the empty key and two more keys
// and checkpoint 42, store "b" with one key and no checkpoint, store "c" with a
// checkpoint and no keys; then closes it cleanly.
func inspectFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app", "1_0")
	b, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Write(Batch{
		Writes: map[string][]Entry{
			"a": {{Key: []byte{}, Value: []byte("empty")}, {Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2"), Value: []byte{}}},
			"b": {{Key: []byte{0xff, 0x00}, Value: []byte("x")}},
		},
		Checkpoints: map[string]int64{"a": 42, "c": 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshot returns the names, sizes, modification times and contents of dir's files.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.ModTime().String() + "|" + fi.Mode().String() + "|" + string(data)
	}
	return out
}

func TestInspectBolt(t *testing.T) {
	dir := inspectFixture(t)
	before := snapshot(t, dir)
	info, err := InspectBolt(dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Previous != StateClean || info.Detail != "" {
		t.Errorf("Previous = %q (%q), want clean", info.Previous, info.Detail)
	}
	if info.Path != filepath.Join(dir, BoltFileName) || info.Size == 0 || info.TxID == 0 || info.StateTime.IsZero() {
		t.Errorf("file info %+v", info)
	}
	want := []BoltStoreInfo{
		{Name: "a", Keys: 3, Checkpoint: 42, HasCheckpoint: true},
		{Name: "b", Keys: 1},
		{Name: "c", Keys: 0, Checkpoint: 7, HasCheckpoint: true},
	}
	if len(info.Stores) != len(want) {
		t.Fatalf("stores %+v, want %+v", info.Stores, want)
	}
	for i, w := range want {
		got := info.Stores[i]
		if got.Name != w.Name || got.Keys != w.Keys || got.Checkpoint != w.Checkpoint || got.HasCheckpoint != w.HasCheckpoint {
			t.Errorf("store %d = %+v, want %+v", i, got, w)
		}
		if (got.Keys > 0) != (got.Bytes > 0) {
			t.Errorf("store %s: %d keys in %d bytes", got.Name, got.Keys, got.Bytes)
		}
	}

	info, err = InspectBolt(dir, InspectOptions{Verify: true})
	if err != nil || !info.Verified || len(info.Stores) != 3 {
		t.Fatalf("with Verify: %+v, %v", info, err)
	}

	var keys, values []string
	err = DumpBolt(dir, "a", InspectOptions{}, func(k, v []byte) error {
		keys, values = append(keys, string(k)), append(values, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != ",k1,k2" || strings.Join(values, ",") != "empty,v1," {
		t.Errorf("dump a: keys %q values %q", keys, values)
	}
	n := 0
	if err := DumpBolt(dir, "c", InspectOptions{}, func(k, v []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("dump of the empty store c: %d keys, %v", n, err)
	}
	stop := errors.New("stop")
	if err := DumpBolt(dir, "a", InspectOptions{}, func(k, v []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an error of fn: got %v", err)
	}
	err = DumpBolt(dir, "nope", InspectOptions{}, func(k, v []byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `no store "nope"`) || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("unknown store: %v", err)
	}
	if err := DumpBolt(dir, "__eddy_meta", InspectOptions{}, func(k, v []byte) error { return nil }); err == nil {
		t.Error("dump of a reserved bucket: no error")
	}

	// Nothing was written: not the data file, the state file or the lock file.
	after := snapshot(t, dir)
	if len(after) != len(before) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s changed", name)
		}
	}
	// The file still opens as cleanly closed.
	be, rep, err := OpenBoltReport(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if rep.Previous != StateClean || rep.Verified || rep.Recreated {
		t.Errorf("after inspection OpenBolt reports %+v", rep)
	}
}

func TestInspectBoltLocked(t *testing.T) {
	dir := inspectFixture(t)
	b, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = InspectBolt(dir, InspectOptions{LockTimeout: 200 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, statestore.ErrLocked) {
		t.Fatalf("InspectBolt of an open file: %v, want statestore.ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "stop the application") || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("the error does not say who holds the file and what to do: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("waited %v for a 200ms lock timeout", took)
	}
	err = DumpBolt(dir, "a", InspectOptions{LockTimeout: 50 * time.Millisecond}, func(k, v []byte) error { return nil })
	if !errors.Is(err, statestore.ErrLocked) {
		t.Fatalf("DumpBolt of an open file: %v, want statestore.ErrLocked", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := InspectBolt(dir, InspectOptions{LockTimeout: 200 * time.Millisecond}); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

func TestInspectBoltUncleanAndDamaged(t *testing.T) {
	dir := inspectFixture(t)
	// A process that died with the file open leaves the state "open" with this boot.
	if err := writeBoltState(dir, boltState{State: "open", Boot: bootID(), PID: 4242}); err != nil {
		t.Fatal(err)
	}
	info, err := InspectBolt(dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantState := StateCrashed
	if bootID() == "" {
		wantState = StateRestart // no boot id on this platform: any unclean close counts as a restart
	}
	if info.Previous != wantState || (wantState == StateCrashed && !strings.Contains(info.Detail, "4242")) {
		t.Errorf("Previous = %q (%q), want %q naming pid 4242", info.Previous, info.Detail, wantState)
	}
	if len(info.Stores) != 3 {
		t.Errorf("stores %+v", info.Stores)
	}

	// A clean close that does not match the file.
	if err := writeBoltState(dir, boltState{State: "closed", TxID: 1, Size: info.Size}); err != nil {
		t.Fatal(err)
	}
	if info, err = InspectBolt(dir, InspectOptions{}); err != nil || info.Previous != StateClean || !strings.Contains(info.Detail, "transaction 1") {
		t.Errorf("mismatched clean close: %q %q %v", info.Previous, info.Detail, err)
	}

	// No state file at all.
	if err := os.Remove(filepath.Join(dir, BoltStateFileName)); err != nil {
		t.Fatal(err)
	}
	if info, err = InspectBolt(dir, InspectOptions{}); err != nil || info.Previous != StateUnknown {
		t.Errorf("no state file: %q %v", info.Previous, err)
	}

	// Both meta pages overwritten: an error wrapping ErrDamaged, not a crash.
	path := filepath.Join(dir, BoltFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(data, bytes.Repeat([]byte{0xa5}, 2*os.Getpagesize()))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verify := range []bool{false, true} {
		if _, err := InspectBolt(dir, InspectOptions{Verify: verify}); !errors.Is(err, ErrDamaged) {
			t.Errorf("Verify %v: damaged file: %v, want ErrDamaged", verify, err)
		}
	}
	if err := DumpBolt(dir, "a", InspectOptions{}, func(k, v []byte) error { return nil }); !errors.Is(err, ErrDamaged) {
		t.Errorf("dump of a damaged file: %v, want ErrDamaged", err)
	}
}

func TestInspectBoltMissingAndEmpty(t *testing.T) {
	dir := t.TempDir()
	if _, err := InspectBolt(dir, InspectOptions{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("InspectBolt created %d files in an empty dir", len(entries))
	}
	if err := os.WriteFile(filepath.Join(dir, BoltFileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := InspectBolt(dir, InspectOptions{})
	if err != nil || len(info.Stores) != 0 || info.Size != 0 {
		t.Errorf("empty file: %+v %v", info, err)
	}
	if err := DumpBolt(dir, "a", InspectOptions{}, func(k, v []byte) error { return nil }); err == nil {
		t.Error("dump of an empty file: no error")
	}
}
