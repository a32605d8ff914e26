//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
)

// child is a running child process.
type child struct {
	name    string
	cmd     *exec.Cmd
	stdout  statusReader // its stdout: the result line, and a scale child's status lines
	logPath string
	started time.Time
	done    chan struct{} // closed when the process has exited and been waited for
	waitErr error

	mu                     sync.Mutex
	peakAnonMB, peakFileMB float64 // largest RssAnon and RssFile sampled from /proc
	hwmMB                  float64 // the last VmHWM read: the peak RSS of the child's own address space
}

// startChild re-executes this command as a child of the given kind.
func (e *env) startChild(kind, name string, spec childSpec) (*child, error) {
	spec.Brokers = e.o.brokers
	perTask, overlap, workers := spec.Tune.PerTask, spec.Tune.Overlap, spec.Tune.Workers // a row's own choices
	spec.Tune = e.o.tune
	spec.Tune.PerTask = spec.Tune.PerTask || perTask
	spec.Tune.Overlap = spec.Tune.Overlap || overlap
	if workers > 0 {
		spec.Tune.Workers = workers
	}
	if e.o.profileDir != "" && slices.Contains(e.o.profileRows, spec.Row) {
		spec.ProfilePrefix = filepath.Join(e.o.profileDir, name)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := &child{name: name, logPath: filepath.Join(e.work, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(c.logPath)
	if err != nil {
		return nil, fmt.Errorf("child log: %w", err)
	}
	args := []string{e.exe, "-child", kind, "-child-spec", string(js)}
	if kind == "kstreams" {
		args = e.ks.command(spec)
	}
	if len(e.o.wrapper) > 0 {
		var w []string
		for _, a := range e.o.wrapper {
			w = append(w, strings.ReplaceAll(a, "{}", name))
		}
		args = append(w, args...)
	}
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Env = append(os.Environ(), e.o.childEnv...)
	c.cmd.Stdout = &c.stdout
	c.cmd.Stderr = logFile
	// A child must not outlive the parent (interrupted, killed): the kernel kills it.
	// Its own process group: stop and kill signal the group, which reaches the child
	// under a -child-wrapper too.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start child %s: %w", name, err)
	}
	go func() { // owned by c: ends when the process exits; every caller waits on c.done
		c.waitErr = c.cmd.Wait()
		_ = logFile.Close()
		close(c.done)
	}()
	go c.sampleMemory() // ends with the process
	return c, nil
}

// sampleMemory reads the child's resident anonymous memory (Go heap, stacks, sarama
// buffers) and resident file-backed memory (chiefly bbolt's memory-mapped store files)
// every 50 ms until it exits, keeping the largest of each. maxrss is their peak sum.
func (c *child) sampleMemory() {
	path := fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var anon, file, hwm float64
		for _, line := range strings.Split(string(b), "\n") {
			var kb float64
			switch {
			case strings.HasPrefix(line, "RssAnon:"):
				_, _ = fmt.Sscanf(line, "RssAnon: %f kB", &kb)
				anon = kb / 1024
			case strings.HasPrefix(line, "RssFile:"):
				_, _ = fmt.Sscanf(line, "RssFile: %f kB", &kb)
				file = kb / 1024
			case strings.HasPrefix(line, "VmHWM:"):
				_, _ = fmt.Sscanf(line, "VmHWM: %f kB", &kb)
				hwm = kb / 1024
			}
		}
		c.mu.Lock()
		c.peakAnonMB, c.peakFileMB = max(c.peakAnonMB, anon), max(c.peakFileMB, file)
		c.hwmMB = max(c.hwmMB, hwm)
		c.mu.Unlock()
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (the child shuts down cleanly: commits, leaves the group) and
// SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	if c.exited() {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		c.kill()
	}
}

// kill sends SIGKILL and waits for the exit.
func (c *child) kill() {
	if c.exited() {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

// wait waits for the child to exit by itself, killing it after timeout or when ctx ends.
func (c *child) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		c.kill()
		return ctx.Err()
	case <-time.After(timeout):
		c.kill()
		return fmt.Errorf("child %s did not finish within %v (log: %s)", c.name, timeout, c.logPath)
	}
}

// usage is what the kernel measured of an exited child.
type usage struct {
	CPU        float64 // user + system seconds
	MaxRSSMB   float64
	PeakAnonMB float64 // sampled
	PeakFileMB float64
}

// result reads an exited child's report and rusage.
func (c *child) result() (childResult, usage, error) {
	var res childResult
	var u usage
	<-c.done
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		u.MaxRSSMB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	c.mu.Lock()
	u.PeakAnonMB, u.PeakFileMB = c.peakAnonMB, c.peakFileMB
	// A child's ru_maxrss is at least its parent's peak RSS when it was exec'd (Linux
	// folds the high-water mark of the address space exec replaces, the parent's under
	// vfork, into it), so small children would all show the parent's size. VmHWM is
	// the peak of the child's own address space; it is read every 50 ms, so a peak in
	// the child's last 50 ms could be missed, never one of the parent's counted.
	if c.hwmMB > 0 {
		u.MaxRSSMB = c.hwmMB
	}
	c.mu.Unlock()
	found := false
	sc := bufio.NewScanner(bytes.NewReader(c.stdout.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				return res, u, fmt.Errorf("child %s: bad result: %w", c.name, err)
			}
			found = true
		}
	}
	switch {
	case res.Err != "":
		return res, u, fmt.Errorf("child %s failed: %s (log: %s)", c.name, res.Err, c.logPath)
	case !found && c.waitErr != nil:
		return res, u, fmt.Errorf("child %s: %w, no result (log: %s)%s", c.name, c.waitErr, c.logPath, logTail(c.logPath))
	}
	return res, u, nil
}

// logTail returns the last lines of a log file, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "\n  " + strings.Join(lines[max(0, len(lines)-8):], "\n  ")
}

// doneFunc reports whether a run's work is visible.
type doneFunc func() (bool, error)

// outputReached is the end of an at-least-once run: the output's high-water marks add
// up to the expected record count (no transaction markers without transactions).
func (e *env) outputReached(topic string, want int64) doneFunc {
	return func() (bool, error) {
		hwm, err := e.endOffsets(topic, sarama.ReadUncommitted)
		return sum(hwm) >= want, err
	}
}

// committedThrough is the end of an exactly-once run: the group's committed offsets
// (read with RequireStable) cover every input partition's end; then, for each
// repartition topic, once no transaction is open on it, they cover its last data record.
// That record is not simply before the last offset: every producer that wrote to a
// partition (one per upstream task) leaves a commit marker there, so a partition can end
// in several markers.
func (e *env) committedThrough(ctx context.Context, group string, input *dataset, repartitions []string) doneFunc {
	inputDone := input == nil
	targets := map[string][]int64{} // repartition topic → offset after its last data record
	return func() (bool, error) {
		if !inputDone {
			offs, stable, err := e.committed(group, input.Topic, input.Partitions)
			if err != nil || !stable {
				return false, err
			}
			for p, want := range input.PerPart {
				if want > 0 && offs[p] < e.inputEnd(input, p) {
					return false, nil
				}
			}
			inputDone = true
		}
		for _, r := range repartitions {
			if targets[r] == nil {
				hwm, err := e.endOffsets(r, sarama.ReadUncommitted)
				if err != nil {
					return false, err
				}
				lso, err := e.endOffsets(r, sarama.ReadCommitted)
				if err != nil {
					return false, err
				}
				if !slices.Equal(hwm, lso) {
					return false, nil
				}
				t := make([]int64, len(hwm))
				for p, h := range hwm {
					if t[p], err = e.afterLastRecord(ctx, r, int32(p), h); err != nil {
						return false, err
					}
				}
				targets[r] = t
			}
			offs, stable, err := e.committed(group, r, int32(len(targets[r])))
			if err != nil || !stable {
				return false, err
			}
			for p, t := range targets[r] {
				if t > 0 && offs[p] < t {
					return false, nil
				}
			}
		}
		return true, nil
	}
}

// allDone is done when each of dones is, asked in order: a later one is asked only once
// the earlier ones are done.
func allDone(dones ...doneFunc) doneFunc {
	return func() (bool, error) {
		for _, d := range dones {
			if ok, err := d(); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}
}

// afterLastRecord returns the offset after the last committed data record of a
// partition that ends at end (0 when it has none), reading its tail with read_committed.
// The tail starts no lower than the log start offset: eddy purges its repartition
// topics (DeleteRecords below the committed offsets every 30 s), and a run that lasts
// longer, as the scale rows', would read below it (OffsetOutOfRange).
func (e *env) afterLastRecord(ctx context.Context, topic string, p int32, end int64) (int64, error) {
	start, err := kread.ListOffset(e.client, topic, p, sarama.OffsetOldest)
	if err != nil {
		return 0, fmt.Errorf("log start of %s/%d: %w", topic, p, err)
	}
	for back := int64(64); ; back *= 8 {
		from := max(start, end-back)
		last := int64(-1)
		err := kread.ReadRange(ctx, e.client, topic, p, from, end, func(r kread.Record) error {
			last = r.Offset
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the tail of %s/%d: %w", topic, p, err)
		}
		if last >= 0 {
			return last + 1, nil
		}
		if from == start {
			return 0, nil // none left: the purge deleted only what the group had committed
		}
	}
}

// inputEnd is the end offset of partition p of an input the parent wrote without
// transactions: its record count.
func (e *env) inputEnd(ds *dataset, p int) int64 { return ds.PerPart[p] }

// measure polls the broker while a child runs: the run starts when the first record
// reaches firstOut and ends when done says so. It returns the seconds in between.
func (e *env) measure(ctx context.Context, c *child, firstOut string, done doneFunc) (seconds, startup float64, err error) {
	return e.measureFrom(ctx, c, e.outputStarted(firstOut), done)
}

// outputStarted is the start of a run whose output is a topic: its first record.
func (e *env) outputStarted(topic string) doneFunc {
	return func() (bool, error) {
		hwm, err := e.endOffsets(topic, sarama.ReadUncommitted)
		return sum(hwm) > 0, err
	}
}

// measureFrom polls while a child runs: the run starts when started says so and ends
// when done does. It returns the seconds in between.
func (e *env) measureFrom(ctx context.Context, c *child, started, done doneFunc) (seconds, startup float64, err error) {
	var t0 time.Time
	deadline := time.Now().Add(e.o.runTimeout)
	var lastErr error
	lastLog := time.Now()
	for {
		if e.o.verbose && time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			e.logf("  %s: waiting %.0f s, first output seen: %v, last error: %v", c.name, time.Since(c.started).Seconds(), !t0.IsZero(), lastErr)
		}
		select {
		case <-ctx.Done():
			c.kill()
			return 0, 0, ctx.Err()
		case <-c.done:
			_, _, rerr := c.result()
			return 0, 0, errors.Join(fmt.Errorf("child %s exited before its work was done (log: %s)%s", c.name, c.logPath, logTail(c.logPath)), rerr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return 0, 0, errors.Join(fmt.Errorf("run %s not done after %v (log: %s)", c.name, e.o.runTimeout, c.logPath), lastErr)
		}
		if t0.IsZero() {
			ok, err := started()
			if err != nil {
				lastErr = err
				continue
			}
			if !ok {
				continue
			}
			t0 = time.Now()
		}
		ok, err := done()
		if err != nil {
			lastErr = err
			continue
		}
		if ok {
			t1 := time.Now()
			return t1.Sub(t0).Seconds(), t0.Sub(c.started).Seconds(), nil
		}
	}
}
