//go:build unix

package eos

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// blockedHelperEnv makes the test binary, started as a child by TestDumpGoroutines,
// block in blockedForDump until it is signalled.
const blockedHelperEnv = "EOS_TEST_BLOCKED_HELPER"

// BlockIfDumpHelper blocks for ever in the child of TestDumpGoroutines; TestMain calls it
// first.
func BlockIfDumpHelper() {
	if os.Getenv(blockedHelperEnv) != "" {
		blockedForDump()
	}
}

//go:noinline
func blockedForDump() {
	os.Stderr.WriteString("blocked\n")
	select {}
}

// When the application stops making progress the harness writes its own goroutines
// (the embedded broker's, when it hosts one) and makes each running instance print its
// own into its log; the instance's exit is not reported as a crash.
func TestDumpGoroutines(t *testing.T) {
	dir := t.TempDir()
	in := &instance{
		cfg:      InstanceConfig{Name: "i0"},
		launcher: Launcher{Exe: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{blockedHelperEnv + "=1"}},
		logDir:   dir,
	}
	if err := in.start(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.proc.cmd.Process.Kill() })
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(in.proc.lastLines(), "blocked") {
		if time.Now().After(deadline) {
			t.Fatalf("the child did not start: %s", in.proc.lastLines())
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := &harness{cfg: Config{WorkDir: dir}, logger: slog.New(slog.NewTextHandler(t.Output(), nil)), res: &Result{}}
	h.instances = []*instance{in}
	h.dumpGoroutines("test")

	own, err := os.ReadFile(filepath.Join(dir, "goroutines-harness.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(own), "TestDumpGoroutines") {
		t.Errorf("the harness's goroutines do not show this test:\n%.2000s", own)
	}
	if !in.proc.exited() {
		t.Fatal("the instance is still running after the dump")
	}
	log, err := os.ReadFile(in.proc.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "SIGQUIT") || !strings.Contains(string(log), "blockedForDump") {
		t.Errorf("the instance's log has no goroutine dump:\n%.2000s", log)
	}
	h.stopAll()
	if len(h.res.Anomalies) > 0 {
		t.Errorf("the dumped instance's exit was reported: %v", h.res.Anomalies)
	}
}
