//go:build unix

package eos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eddy-streams/eddy/internal/task"
)

// Launcher says how to start an instance process: the harness runs Exe with Args and
// the current environment plus Env plus InstanceEnv. The eos-verify command launches
// itself; a test launches its own test binary (whose TestMain calls InstanceMain when
// IsInstance).
type Launcher struct {
	Exe  string
	Args []string
	Env  []string
}

// instance is one instance slot of the harness: a state dir that successive processes
// (incarnations) use.
type instance struct {
	cfg         InstanceConfig
	launcher    Launcher
	logDir      string
	incarnation int
	proc        *process
	// past holds the processes that ended, for their restore events.
	past []*process
}

// process is one incarnation of an instance.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error     // Wait's result, set before done is closed
	endedAt time.Time // when Wait returned, set before done is closed
	// expected is set when the harness stops the process, so an exit is not reported as
	// a crash.
	expected bool
	// dumped is set when the harness made the process print its goroutines and exit
	// (dumpGoroutines).
	dumped bool
	// checkpoints the state dir held when this process started after a SIGKILL; nil
	// when it did not follow a SIGKILL.
	afterKill map[string]int64

	mu       sync.Mutex
	partial  []byte
	restores []RestoreEvent
	// operatorStarts are the OperatorStartMsg lines the process logged.
	operatorStarts []operatorStartAt
	// storeRebuilds counts the task.StoreRebuildMsg lines it logged.
	storeRebuilds int
	// releases counts the tasks it released to their next owner (cooperative
	// rebalancing: releaseLine).
	releases int
	// generations are the group generations of the assignments it logged
	// (assignmentLine), in order.
	generations []int32
	// standbys are the tasks it was assigned as standby replicas (warm-up replicas
	// too: eddy assigns those as standbys), by the assignments it logged.
	standbys map[string]bool
	// sinkFault is the step at which it logged SinkFaultMsg (it killed itself there).
	sinkFault string
	tail      [][]byte // last log lines
	file      *os.File
	// races are the race detector's reports in the log (instances built with -race);
	// race is the one being read.
	races []string
	race  []string
}

const (
	tailLines  = 30
	maxLineLen = 400
	// A race detector report is framed by these lines.
	raceBegin = "WARNING: DATA RACE"
	raceEnd   = "=================="
)

// raceReports returns the race detector's reports in the process's log.
func (p *process) raceReports() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.races...)
}

// Write receives the process's stderr: it goes to the log file, and restore lines are
// parsed.
func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.file.Write(b); err != nil {
		return 0, err
	}
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		line := bytes.Clone(p.partial[:i])
		p.partial = p.partial[i+1:]
		if ev, ok := parseRestoreLine(line); ok {
			p.restores = append(p.restores, ev)
		}
		if part, off, ok := parseOperatorStartLine(line); ok {
			p.operatorStarts = append(p.operatorStarts, operatorStartAt{part, off})
		}
		if bytes.Contains(line, storeRebuildLine) {
			p.storeRebuilds++
		}
		if bytes.Contains(line, releaseLine) {
			p.releases++
		}
		if bytes.Contains(line, assignmentLine) {
			var l struct {
				Generation int32 `json:"generation"`
				Standby    []struct{ Subtopology, Partition int }
			}
			if json.Unmarshal(line, &l) == nil {
				p.generations = append(p.generations, l.Generation)
				for _, s := range l.Standby {
					if p.standbys == nil {
						p.standbys = map[string]bool{}
					}
					p.standbys[fmt.Sprintf("%d_%d", s.Subtopology, s.Partition)] = true
				}
			}
		}
		if bytes.Contains(line, sinkFaultLine) {
			var l struct {
				Step string `json:"step"`
			}
			if json.Unmarshal(line, &l) == nil {
				p.sinkFault = l.Step
			}
		}
		switch {
		case string(line) == raceBegin:
			p.race = []string{raceBegin}
		case p.race != nil && string(line) == raceEnd:
			p.races = append(p.races, strings.Join(p.race, "\n"))
			p.race = nil
		case p.race != nil:
			p.race = append(p.race, string(line))
		}
		if len(line) > maxLineLen {
			line = append(line[:maxLineLen:maxLineLen], "..."...)
		}
		p.tail = append(p.tail, line)
		if len(p.tail) > tailLines {
			p.tail = p.tail[1:]
		}
	}
	return len(b), nil
}

// heldStandby reports whether the process was assigned task as a standby replica.
func (p *process) heldStandby(task string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.standbys[task]
}

func (p *process) restoreEvents() []RestoreEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]RestoreEvent(nil), p.restores...)
}

type operatorStartAt struct {
	partition int32
	offset    int64
}

// storeRebuildLine is how a JSON log line of task.StoreRebuildMsg reads.
var storeRebuildLine = []byte(`"msg":"` + task.StoreRebuildMsg + `"`)

// sinkFaultLine is how a JSON log line of SinkFaultMsg reads.
var sinkFaultLine = []byte(`"msg":"` + SinkFaultMsg + `"`)

// assignmentLine is how the runtime's JSON log line of each assignment it takes reads
// (group.go's onAssignment: "assignment", with the generation).
var assignmentLine = []byte(`"msg":"assignment"`)

// releaseLine is what an instance logs when it lets a revoked task go under cooperative
// rebalancing (eddy's groupcooperative.go, crew.release).
var releaseLine = []byte(`"msg":"task released to its next owner"`)

// assignmentGenerations returns the generations of the assignments the process took.
func (p *process) assignmentGenerations() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int32(nil), p.generations...)
}

// sinkFaultStep is the step at which the process killed itself ("" none).
func (p *process) sinkFaultStep() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sinkFault
}

func (p *process) releaseCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.releases
}

func (p *process) storeRebuildCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.storeRebuilds
}

func (p *process) operatorStartEvents() []operatorStartAt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]operatorStartAt(nil), p.operatorStarts...)
}

func (p *process) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(bytes.Join(p.tail, []byte("\n")))
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to end.
func (p *process) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("eos: signal %v to %s: %w", sig, p.name, err)
	}
	return nil
}

// start starts a new incarnation of the instance.
func (in *instance) start(afterKill map[string]int64) error {
	in.incarnation++
	name := fmt.Sprintf("%s#%d", in.cfg.Name, in.incarnation)
	cfg := in.cfg
	cfg.Name = name
	js, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("eos: instance config: %w", err)
	}
	logPath := filepath.Join(in.logDir, fmt.Sprintf("%s-%d.log", in.cfg.Name, in.incarnation))
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("eos: instance log: %w", err)
	}
	cmd := exec.Command(in.launcher.Exe, in.launcher.Args...)
	// An instance built with -race reports races in its log (the harness reads them)
	// and does not exit 66 for them: the run goes on, so its result is checked too, and
	// the race fails it as an anomaly.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " exitcode=0")
	cmd.Env = append(append(os.Environ(), in.launcher.Env...), InstanceEnv+"="+string(js), "GORACE="+gorace)
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), file: f, afterKill: afterKill}
	cmd.Stdout = p
	cmd.Stderr = p
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("eos: start %s: %w", name, err)
	}
	// The waiter ends when the process does; every path of the harness ends the
	// processes it started (stopAll, or kill on the way out).
	go func() {
		p.err = cmd.Wait()
		p.endedAt = time.Now()
		p.mu.Lock()
		_ = p.file.Close()
		p.mu.Unlock()
		close(p.done)
	}()
	if in.proc != nil {
		in.past = append(in.past, in.proc)
	}
	in.proc = p
	return nil
}

// processes returns every incarnation, oldest first.
func (in *instance) processes() []*process {
	out := append([]*process(nil), in.past...)
	if in.proc != nil {
		out = append(out, in.proc)
	}
	return out
}
