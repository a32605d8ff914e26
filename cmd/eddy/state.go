package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/processor"
)

const inspectUsage = `Usage: eddy state inspect [flags] DIR

Describes the local state of a stopped application. DIR is an application state dir
(<StateDir>/<application ID>, holding one dir per task such as 1_0) or one task dir.
Per task it shows the store file, its size and whether its last owner closed it
cleanly; per store the key count, the space its pages use, and the checkpoint: the
changelog offset the store reflects, from which a restore reads the changelog.

Files are only read. A running instance keeps its files locked: stop it first.

Example:
  eddy state inspect /var/lib/eddy/wordcount
`

const dumpUsage = `Usage: eddy state dump [flags] DIR STORE

Prints every key and value of the store STORE, one "key<TAB>value" line each, in the
byte order of the keys. DIR is an application state dir (<StateDir>/<application ID>)
or one task dir; for an application dir every task holding the store is dumped and
each line starts with the task ID and a tab, unless --task picks one task.

--key-serde and --value-serde decode the bytes: ` + serdeNames + `
(bytes prints hex). Bytes a serde cannot decode are printed as ` + undecodableMarker + `<hex>, and
the number of such keys and values is reported on stderr at the end. A string with
control characters is printed Go-quoted.

Files are only read. A running instance keeps its files locked: stop it first.

Examples:
  eddy state dump --value-serde int64 /var/lib/eddy/wordcount counts
  eddy state dump --value-serde timestamped:int64 /var/lib/eddy/views counts
  eddy state dump --key-serde window:string --value-serde timestamped:int64 /var/lib/eddy/views per-minute
  eddy state dump --key-serde session:string --value-serde int64 /var/lib/eddy/views sessions
`

// taskDir is one task's state dir.
type taskDir struct {
	id  processor.TaskID
	dir string
}

// stateTarget is what a DIR argument names.
type stateTarget struct {
	appDir string // the application state dir, "" if DIR is a task dir of no app dir
	tasks  []taskDir
	single bool // DIR is one task dir
}

// findTasks resolves a DIR argument: one task dir (it holds the store file) or an
// application dir (it holds task dirs).
func findTasks(dir string) (stateTarget, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return stateTarget{}, fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return stateTarget{}, fmt.Errorf("state dir %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, kvstore.BoltFileName)); err == nil {
		t := stateTarget{single: true}
		clean := filepath.Clean(dir)
		id, err := processor.ParseTaskID(filepath.Base(clean))
		if err == nil {
			t.appDir = filepath.Dir(clean)
		}
		t.tasks = []taskDir{{id: id, dir: dir}}
		return t, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return stateTarget{}, fmt.Errorf("state dir: %w", err)
	}
	t := stateTarget{appDir: dir}
	var apps []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		id, err := processor.ParseTaskID(e.Name())
		if err != nil {
			if looksLikeAppDir(sub) {
				apps = append(apps, e.Name())
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(sub, kvstore.BoltFileName)); err == nil {
			t.tasks = append(t.tasks, taskDir{id: id, dir: sub})
		}
	}
	if len(t.tasks) == 0 {
		if len(apps) > 0 {
			return stateTarget{}, fmt.Errorf("%s holds no task state but looks like a StateDir holding the application(s) %s: pass %s",
				dir, strings.Join(apps, ", "), filepath.Join(dir, apps[0]))
		}
		return stateTarget{}, fmt.Errorf("%s holds no task state: want an application state dir (<StateDir>/<application ID>, with task dirs such as 1_0) or a task dir holding %s",
			dir, kvstore.BoltFileName)
	}
	slices.SortFunc(t.tasks, func(a, b taskDir) int {
		return cmp.Or(cmp.Compare(a.id.Subtopology, b.id.Subtopology), cmp.Compare(a.id.Partition, b.id.Partition))
	})
	return t, nil
}

// looksLikeAppDir reports whether dir holds a task dir with a store file.
func looksLikeAppDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := processor.ParseTaskID(e.Name()); err == nil && e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), kvstore.BoltFileName)); err == nil {
				return true
			}
		}
	}
	return false
}

// checkNotRunning fails when an instance holds the application dir's lock.
func (t stateTarget) checkNotRunning() error {
	if t.appDir == "" {
		return nil
	}
	release, err := lockAppDir(t.appDir)
	if err != nil {
		return fmt.Errorf("%w; the store files cannot be read while the application runs", err)
	}
	release()
	return nil
}

func runInspect(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eddy state inspect", inspectUsage, stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	verify := fs.Bool("verify", false, "run the full consistency check of each file first (reads every page)")
	lockTimeout := fs.Duration("lock-timeout", time.Second, "how long to wait for a task's lock before giving up")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usagef("state inspect: want one DIR, got %d arguments", len(pos))
	}
	target, err := findTasks(pos[0])
	if err != nil {
		return fmt.Errorf("state inspect: %w", err)
	}
	if err := target.checkNotRunning(); err != nil {
		return fmt.Errorf("state inspect: %w", err)
	}
	report := inspectReport{Dir: pos[0]}
	if target.appDir != "" {
		report.Application = filepath.Base(filepath.Clean(target.appDir))
	}
	// A damaged file is one task's trouble: it is marked and the others are listed
	// (issue 26: inspect stopped at the first damaged task and listed nothing else).
	damaged := 0
	for _, td := range target.tasks {
		info, err := kvstore.InspectBolt(td.dir, kvstore.InspectOptions{LockTimeout: *lockTimeout, Verify: *verify})
		if err != nil && !errors.Is(err, kvstore.ErrDamaged) {
			return fmt.Errorf("state inspect: task %s: %w", td.id, err)
		}
		if err != nil {
			damaged++
			tr := taskReport{Path: filepath.Join(td.dir, kvstore.BoltFileName), Damaged: err.Error(), Stores: []storeReport{}}
			if target.appDir != "" {
				tr.Task = td.id.String()
			}
			if fi, serr := os.Stat(tr.Path); serr == nil {
				tr.Size, tr.DiskBytes = fi.Size(), diskBytes(fi)
			}
			report.Tasks = append(report.Tasks, tr)
			continue
		}
		report.Tasks = append(report.Tasks, newTaskReport(td, target, info))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := report.print(stdout); err != nil {
		return err
	}
	if damaged > 0 {
		return fmt.Errorf("state inspect: %d of %d task(s) have a damaged store file; the application moves such a file aside and restores the task's stores from their changelogs when it next opens the task", damaged, len(target.tasks))
	}
	return nil
}

// inspectReport is the output of state inspect (--json prints it as it is).
type inspectReport struct {
	Dir         string       `json:"dir"`
	Application string       `json:"application,omitempty"`
	Tasks       []taskReport `json:"tasks"`
}

type taskReport struct {
	Task string `json:"task,omitempty"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	// DiskBytes is what the file uses on disk: bbolt files are sparse, and their
	// apparent size (Size, 16 MiB for one key) is no measure of the disk they take.
	DiskBytes int64 `json:"disk_bytes"`
	// Damaged is why the file cannot be read; empty when it can.
	Damaged       string        `json:"damaged,omitempty"`
	TxID          uint64        `json:"bbolt_txid"`
	ClosedCleanly bool          `json:"closed_cleanly"`
	CloseState    string        `json:"close_state"`
	Detail        string        `json:"detail,omitempty"`
	StateTime     *time.Time    `json:"state_time,omitempty"`
	Verified      bool          `json:"verified"`
	MovedAside    []string      `json:"moved_aside,omitempty"`
	Stores        []storeReport `json:"stores"`
}

type storeReport struct {
	Name       string `json:"name"`
	Keys       int64  `json:"keys"`
	Bytes      int64  `json:"bytes"`
	Checkpoint *int64 `json:"checkpoint"`         // null: none
	Segments   int    `json:"segments,omitempty"` // a window or session store's time segments
}

func newTaskReport(td taskDir, target stateTarget, info kvstore.BoltFileInfo) taskReport {
	r := taskReport{
		Path: info.Path, Size: info.Size, TxID: info.TxID, DiskBytes: -1,
		ClosedCleanly: info.Previous == kvstore.StateClean && info.Detail == "",
		CloseState:    string(info.Previous), Detail: info.Detail,
		Verified: info.Verified, MovedAside: info.MovedAside, Stores: []storeReport{},
	}
	if target.appDir != "" {
		r.Task = td.id.String()
	}
	if fi, err := os.Stat(info.Path); err == nil {
		r.DiskBytes = diskBytes(fi)
	}
	if !info.StateTime.IsZero() {
		st := info.StateTime
		r.StateTime = &st
	}
	for _, s := range info.Stores {
		sr := storeReport{Name: s.Name, Keys: s.Keys, Bytes: s.Bytes, Segments: s.Segments}
		if s.HasCheckpoint {
			cp := s.Checkpoint
			sr.Checkpoint = &cp
		}
		r.Stores = append(r.Stores, sr)
	}
	return r
}

func (r inspectReport) print(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if r.Application != "" {
		fmt.Fprintf(bw, "Application %q in %s: %d task(s)\n", r.Application, r.Dir, len(r.Tasks))
	}
	for _, t := range r.Tasks {
		name := t.Task
		if name == "" {
			name = t.Path
		}
		fmt.Fprintf(bw, "\ntask %s  %s  %s", name, t.Path, humanBytes(t.Size))
		if t.DiskBytes >= 0 {
			fmt.Fprintf(bw, " (%s on disk)", humanBytes(t.DiskBytes))
		}
		fmt.Fprint(bw, "  ")
		if t.Damaged != "" {
			fmt.Fprintf(bw, "DAMAGED: %s\n  the application moves this file aside and restores the task's stores from their changelogs when it next opens the task\n", t.Damaged)
			continue
		}
		switch {
		case t.ClosedCleanly:
			fmt.Fprint(bw, "closed cleanly")
		case t.CloseState == string(kvstore.StateClean):
			fmt.Fprintf(bw, "closed cleanly, but %s", t.Detail)
		default:
			fmt.Fprintf(bw, "NOT closed cleanly (%s): %s", t.CloseState, t.Detail)
		}
		if t.StateTime != nil {
			fmt.Fprintf(bw, " (%s)", t.StateTime.Format(time.RFC3339))
		}
		if t.Verified {
			fmt.Fprint(bw, "; consistency check passed")
		}
		fmt.Fprintln(bw)
		for _, m := range t.MovedAside {
			fmt.Fprintf(bw, "  damaged file moved aside: %s\n", m)
		}
		if len(t.Stores) == 0 {
			fmt.Fprintln(bw, "  no stores")
			continue
		}
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STORE\tKEYS\tBYTES\tCHECKPOINT")
		for _, s := range t.Stores {
			cp := "none"
			if s.Checkpoint != nil {
				cp = fmt.Sprint(*s.Checkpoint)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", s.Name, s.Keys, s.Bytes, cp)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func runDump(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eddy state dump", dumpUsage, stderr)
	keySerde := fs.String("key-serde", "string", "decode keys with this `serde`: "+serdeNames)
	valueSerde := fs.String("value-serde", "bytes", "decode values with this `serde`: "+serdeNames)
	task := fs.String("task", "", "dump only this task (such as 1_0) of an application dir")
	lockTimeout := fs.Duration("lock-timeout", time.Second, "how long to wait for a task's lock before giving up")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usagef("state dump: want DIR and STORE, got %d arguments", len(pos))
	}
	dir, store := pos[0], pos[1]
	kd, err := newDecoder(*keySerde)
	if err != nil {
		return usagef("state dump: --key-serde: %v", err)
	}
	vd, err := newDecoder(*valueSerde)
	if err != nil {
		return usagef("state dump: --value-serde: %v", err)
	}
	target, err := findTasks(dir)
	if err != nil {
		return fmt.Errorf("state dump: %w", err)
	}
	if *task != "" {
		id, err := processor.ParseTaskID(*task)
		if err != nil {
			return usagef("state dump: --task: %v", err)
		}
		i := slices.IndexFunc(target.tasks, func(t taskDir) bool { return t.id == id })
		if i < 0 {
			return fmt.Errorf("state dump: --task %s: %s has no task %s (it has %s)", id, dir, id, taskList(target.tasks))
		}
		target.tasks, target.single = target.tasks[i:i+1], true
	}
	if err := target.checkNotRunning(); err != nil {
		return fmt.Errorf("state dump: %w", err)
	}
	opts := kvstore.InspectOptions{LockTimeout: *lockTimeout}

	// With several tasks, dump those that hold the store.
	tasks := target.tasks
	if !target.single {
		tasks = nil
		have := map[string]bool{}
		for _, td := range target.tasks {
			info, err := kvstore.InspectBolt(td.dir, opts)
			if err != nil {
				return fmt.Errorf("state dump: task %s: %w", td.id, err)
			}
			for _, s := range info.Stores {
				have[s.Name] = true
				if s.Name == store {
					tasks = append(tasks, td)
				}
			}
		}
		if len(tasks) == 0 {
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range have {
					if !yield(n) {
						return
					}
				}
			})
			if len(names) == 0 {
				return fmt.Errorf("state dump: no task in %s has a store %q (they hold no stores)", dir, store)
			}
			return fmt.Errorf("state dump: no task in %s has a store %q (stores: %s)", dir, store, strings.Join(names, ", "))
		}
	}

	bw := bufio.NewWriter(stdout)
	var n, badKeys, badValues int
	for _, td := range tasks {
		prefix := ""
		if !target.single {
			prefix = td.id.String() + "\t"
		}
		err := kvstore.DumpBolt(td.dir, store, opts, func(k, v []byte) error {
			ks, kok := kd.render(k)
			vs, vok := vd.render(v)
			n++
			if !kok {
				badKeys++
			}
			if !vok {
				badValues++
			}
			_, err := fmt.Fprintf(bw, "%s%s\t%s\n", prefix, ks, vs)
			return err
		})
		if err != nil {
			_ = bw.Flush()
			return fmt.Errorf("state dump: task %s: %w", td.id, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("state dump: write: %w", err)
	}
	if badKeys > 0 || badValues > 0 {
		fmt.Fprintf(stderr, "eddy state dump: %d of %d keys could not be decoded as %s and %d of %d values as %s; they are printed as %s<hex>\n",
			badKeys, n, kd.name, badValues, n, vd.name, undecodableMarker)
	}
	return nil
}

func taskList(tasks []taskDir) string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.id.String()
	}
	return strings.Join(ids, ", ")
}

// humanBytes renders a size in bytes, with MiB or GiB for large ones.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%d bytes (%.1f GiB)", n, float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
