package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topologytest"
)

// runCmd runs the command line in-process and returns stdout, stderr and the error.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// wordcountStateDir runs the word-count topology in the test driver with bbolt stores
// and returns the application state dir. The input has 9 words, 4 distinct.
func wordcountStateDir(t testing.TB) string {
	dir, _ := wordcountState(t)
	return dir
}

// wordcountState is wordcountStateDir, and returns the number of records in the
// changelog of the store "counts" too.
func wordcountState(t testing.TB) (string, int) {
	t.Helper()
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: "wc", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	if err := in.PipeValues("hello world", "Hello again, world", "bye bye hello"); err != nil {
		t.Fatal(err)
	}
	changelog := len(d.Records(d.ChangelogTopic(wordcount.StoreName)))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(stateDir, "wc"), changelog
}

func TestStateInspect(t *testing.T) {
	appDir, changelog := wordcountState(t)
	if changelog == 0 {
		t.Fatal("the driver wrote no changelog records")
	}

	out, _, err := runCmd(t, "state", "inspect", "--json", appDir)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if rep.Application != "wc" || len(rep.Tasks) != 2 || rep.Tasks[0].Task != "0_0" || rep.Tasks[1].Task != "1_0" {
		t.Fatalf("report %+v", rep)
	}
	for _, task := range rep.Tasks {
		if !task.ClosedCleanly || task.CloseState != "clean" || task.Size == 0 || task.StateTime == nil {
			t.Errorf("task %s: %+v", task.Task, task)
		}
	}
	if len(rep.Tasks[0].Stores) != 0 {
		t.Errorf("task 0_0 (split, no store) has stores %+v", rep.Tasks[0].Stores)
	}
	st := rep.Tasks[1].Stores
	// The store reflects its whole changelog: its checkpoint is the offset after the
	// last changelog record.
	if len(st) != 1 || st[0].Name != "counts" || st[0].Keys != 4 || st[0].Checkpoint == nil || *st[0].Checkpoint != int64(changelog) || st[0].Bytes <= 0 {
		t.Fatalf("task 1_0 stores %+v, want counts with 4 keys and checkpoint %d", st, changelog)
	}

	// Text output of the whole app dir and of one task dir.
	out, _, err = runCmd(t, "state", "inspect", appDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Application "wc"`, "2 task(s)", "task 0_0", "no stores", "task 1_0", "closed cleanly"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if row := regexp.MustCompile(fmt.Sprintf(`\n  counts +4 +\d+ +%d\n`, changelog)); !row.MatchString(out) {
		t.Errorf("inspect output lacks the row of counts (4 keys, checkpoint %d):\n%s", changelog, out)
	}
	out, _, err = runCmd(t, "state", "inspect", "--verify", filepath.Join(appDir, "1_0"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "task 1_0") || !strings.Contains(out, "consistency check passed") || strings.Contains(out, "0_0") {
		t.Errorf("inspect of one task dir:\n%s", out)
	}

	// The parent of the app dir gets a hint, not a listing.
	_, _, err = runCmd(t, "state", "inspect", filepath.Dir(appDir))
	if err == nil || !strings.Contains(err.Error(), "pass "+appDir) {
		t.Errorf("inspect of the StateDir itself: %v", err)
	}
	_, _, err = runCmd(t, "state", "inspect", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "holds no task state") {
		t.Errorf("inspect of an empty dir: %v", err)
	}
	var ue *usageError
	if _, _, err = runCmd(t, "state", "inspect"); !errors.As(err, &ue) {
		t.Errorf("inspect without DIR: %v, want a usage error", err)
	}
}

func TestStateInspectUnclean(t *testing.T) {
	appDir := wordcountStateDir(t)
	// A process that died with the file open leaves this state file behind.
	state := `{"state":"open","pid":4242,"time":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(appDir, "1_0", kvstore.BoltStateFileName), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, "state", "inspect", "--json", appDir)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if task := rep.Tasks[1]; task.ClosedCleanly || task.CloseState == "clean" || task.Detail == "" || task.Stores[0].Keys != 4 {
		t.Errorf("unclean task: %+v", task)
	}
	out, _, err = runCmd(t, "state", "inspect", appDir)
	if err != nil || !strings.Contains(out, "NOT closed cleanly") {
		t.Errorf("text output of an unclean file (%v):\n%s", err, out)
	}
}

// TestStateLocked: while the application (its state dir lock) or a task (its store
// lock) is in use, inspect and dump fail at once, saying why, instead of hanging.
func TestStateLocked(t *testing.T) {
	appDir := wordcountStateDir(t)

	// A running instance holds <app dir>/.lock (the runtime's lockStateDir).
	lock, err := os.OpenFile(filepath.Join(appDir, eddy.StateDirLockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.WriteString("pid 4242\n"); err != nil {
		t.Fatal(err)
	}
	if ok, err := flock.TryLock(lock); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	for _, args := range [][]string{
		{"state", "inspect", appDir},
		{"state", "inspect", filepath.Join(appDir, "1_0")},
		{"state", "dump", appDir, "counts"},
	} {
		_, _, err := runCmd(t, args...)
		if !errors.Is(err, errGroupActive) || !strings.Contains(err.Error(), "pid 4242") || !strings.Contains(err.Error(), "stop it first") {
			t.Errorf("%v with the app dir locked: %v", args, err)
		}
	}
	_ = lock.Close() // releases the lock

	// A task's store open by its owner: the lock wait is bounded.
	b, err := kvstore.OpenBolt(filepath.Join(appDir, "1_0"), kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, args := range [][]string{
		{"state", "inspect", "--lock-timeout", "100ms", appDir},
		{"state", "dump", "--lock-timeout", "100ms", filepath.Join(appDir, "1_0"), "counts"},
	} {
		start := time.Now()
		_, _, err := runCmd(t, args...)
		if !errors.Is(err, statestore.ErrLocked) || !strings.Contains(err.Error(), "stop the application") {
			t.Errorf("%v with the task open: %v", args, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v waited %v", args, d)
		}
	}
}

func TestStateDump(t *testing.T) {
	appDir := wordcountStateDir(t)
	want := "again\t1\nbye\t2\nhello\t3\nworld\t2\n"

	out, stderr, err := runCmd(t, "state", "dump", "--value-serde", "int64", filepath.Join(appDir, "1_0"), "counts")
	if err != nil {
		t.Fatal(err)
	}
	// Keys in byte order, so "bye" < "hello"; the first line is "again".
	if out != want || stderr != "" {
		t.Errorf("dump of one task:\n%s\nstderr: %s\nwant:\n%s", out, stderr, want)
	}
	// Flags after the positional arguments; the app dir prefixes the task ID.
	out, _, err = runCmd(t, "state", "dump", appDir, "counts", "--value-serde=long")
	if err != nil {
		t.Fatal(err)
	}
	if out != prefixLines("1_0\t", want) {
		t.Errorf("dump of the app dir:\n%s", out)
	}
	out, _, err = runCmd(t, "state", "dump", "--task", "1_0", appDir, "counts", "--value-serde", "int64")
	if err != nil || out != want {
		t.Errorf("dump --task 1_0 (%v):\n%s", err, out)
	}
	// Default value serde: hex bytes.
	out, _, err = runCmd(t, "state", "dump", "--task", "1_0", appDir, "counts")
	if err != nil || !strings.Contains(out, "hello\t0000000000000003\n") {
		t.Errorf("dump with bytes values (%v):\n%s", err, out)
	}
	// The wrong serde: every value undecodable, shown as hex, counted on stderr.
	out, stderr, err = runCmd(t, "state", "dump", "--value-serde", "int32", "--task", "1_0", appDir, "counts")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "hello\t!hex:0000000000000003\n") || strings.Count(out, "\n") != 4 {
		t.Errorf("dump with a wrong value serde:\n%s", out)
	}
	if !strings.Contains(stderr, "0 of 4 keys") || !strings.Contains(stderr, "4 of 4 values as int32") {
		t.Errorf("failure count: %q", stderr)
	}

	// Errors that name what is wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"state", "dump", appDir, "nope"}, `no task in ` + appDir + ` has a store "nope" (stores: counts)`},
		{[]string{"state", "dump", filepath.Join(appDir, "1_0"), "nope"}, `no store "nope" (it holds counts)`},
		{[]string{"state", "dump", "--task", "7_0", appDir, "counts"}, "has no task 7_0 (it has 0_0, 1_0)"},
		{[]string{"state", "dump", "--value-serde", "avro", appDir, "counts"}, `unknown serde "avro"`},
		{[]string{"state", "dump", appDir}, "want DIR and STORE"},
	} {
		_, _, err := runCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestStateDumpSerdes dumps a store written byte by byte: every serde, undecodable
// keys and values, the empty key, control characters.
func TestStateDumpSerdes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app", "0_3")
	b, err := kvstore.OpenBolt(dir, kvstore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) []byte { x, _ := serde.Int64().Serialize("", v); return x }
	i32 := func(v int32) []byte { x, _ := serde.Int32().Serialize("", v); return x }
	f64 := func(v float64) []byte { x, _ := serde.Float64().Serialize("", v); return x }
	entries := []kvstore.Entry{
		{Key: []byte{}, Value: []byte(`{"empty": true}`)},
		{Key: i64(-1), Value: []byte("not json")},
		{Key: i64(7), Value: []byte("{\n  \"a\": [1, 2]\n}")},
		{Key: []byte("tab\there"), Value: []byte(`"s"`)},
		{Key: []byte{0xff, 0xfe}, Value: []byte(`null`)},
	}
	kvstore.SortEntries(entries)
	err = b.Write(kvstore.Batch{
		Writes:      map[string][]kvstore.Entry{"s": entries, "n": {{Key: i32(5), Value: f64(2.5)}, {Key: i32(-3), Value: f64(-0.125)}}},
		Checkpoints: map[string]int64{"s": 11},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	out, stderr, err := runCmd(t, "state", "dump", "--key-serde", "string", "--value-serde", "json", dir, "s")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantLines := []string{
		"\t" + `{"empty":true}`,                                   // the empty key comes first
		`"\x00\x00\x00\x00\x00\x00\x00\a"` + "\t" + `{"a":[1,2]}`, // UTF-8 with control characters: quoted
		`"tab\there"` + "\t" + `"s"`,
		"!hex:fffe\tnull", // not UTF-8
		"!hex:ffffffffffffffff\t!hex:6e6f74206a736f6e",
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("dump as string/json:\n%s\nwant:\n%s", out, strings.Join(wantLines, "\n"))
	}
	if !strings.Contains(stderr, "2 of 5 keys could not be decoded as string and 1 of 5 values as json") {
		t.Errorf("failure count: %q", stderr)
	}

	out, _, err = runCmd(t, "state", "dump", "--key-serde", "int64", "--value-serde", "bytes", dir, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"!hex:\t", "7\t7b0a", "-1\t6e6f74", "!hex:fffe\t6e756c6c"} {
		if !strings.Contains(out, want) {
			t.Errorf("dump as int64/bytes lacks %q:\n%s", want, out)
		}
	}

	out, stderr, err = runCmd(t, "state", "dump", "--key-serde", "int32", "--value-serde", "float64", dir, "n")
	if err != nil || stderr != "" {
		t.Fatalf("%v %s", err, stderr)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	if strings.Join(got, ",") != "-3\t-0.125,5\t2.5" {
		t.Errorf("dump as int32/float64:\n%s", out)
	}

	// inspect of the same dir: a task dir whose parent has no other tasks.
	out, _, err = runCmd(t, "state", "inspect", "--json", dir)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != 1 || rep.Tasks[0].Task != "0_3" || len(rep.Tasks[0].Stores) != 2 {
		t.Fatalf("report %+v", rep)
	}
	n, s := rep.Tasks[0].Stores[0], rep.Tasks[0].Stores[1]
	if n.Name != "n" || n.Keys != 2 || n.Checkpoint != nil || s.Name != "s" || s.Keys != 5 || s.Checkpoint == nil || *s.Checkpoint != 11 {
		t.Errorf("stores %+v %+v", n, s)
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  string
		key  string
	}{
		{[]string{"a", "b"}, "a,b", "string"},
		{[]string{"--key-serde", "int64", "a", "b"}, "a,b", "int64"},
		{[]string{"a", "--key-serde", "int64", "b"}, "a,b", "int64"},
		{[]string{"a", "b", "--key-serde=int64"}, "a,b", "int64"},
		{[]string{"a", "--", "-b"}, "a,-b", "string"},
	} {
		fs := newFlagSet("t", "", &bytes.Buffer{})
		key := fs.String("key-serde", "string", "")
		pos, err := parseInterleaved(fs, c.args)
		if err != nil || strings.Join(pos, ",") != c.pos || *key != c.key {
			t.Errorf("%q: %q %q %v, want %q %q", c.args, pos, *key, err, c.pos, c.key)
		}
	}
	fs := newFlagSet("t", "", &bytes.Buffer{})
	var ue *usageError
	if _, err := parseInterleaved(fs, []string{"a", "--nope"}); !errors.As(err, &ue) {
		t.Errorf("unknown flag: %v", err)
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"state"}, 2},
		{[]string{"state", "list"}, 2},
		{[]string{"-h"}, 0},
		{[]string{"reset", "-h"}, 0},
		{[]string{"state", "inspect", "-h"}, 0},
		{[]string{"state", "dump", "--help"}, 0},
		{[]string{"reset", "--brokers", "x:1"}, 2},
		{[]string{"reset", "--brokers", "x:1", "--application-id", "a", "--to-datetime", "yesterday"}, 2},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, &stdout, &stderr)
		if code := exitCode(err, &stderr); code != c.code {
			t.Errorf("%q: exit %d (%v), want %d", c.args, code, err, c.code)
		}
		if stdout.Len()+stderr.Len() == 0 {
			t.Errorf("%q: no output", c.args)
		}
	}
	var stdout, stderr bytes.Buffer
	_ = run(context.Background(), []string{"reset", "-h"}, &stdout, &stderr)
	if !strings.Contains(stderr.String(), "--dry-run") && !strings.Contains(stderr.String(), "-dry-run") {
		t.Errorf("reset -h does not list its flags:\n%s", stderr.String())
	}
}

func prefixLines(prefix, s string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
