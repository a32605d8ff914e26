//go:build unix

package eos

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"
)

// dumpGoroutines writes every goroutine's stack when the application stops making
// progress, so a deadlock can be read in the kept work dir: the harness's own (its
// process hosts the embedded broker, kfake, when the run uses it) to
// goroutines-harness.txt, and each running instance's, which SIGQUIT makes the Go
// runtime print to the instance's log before it exits. The instances are marked as
// stopped by the harness, so their exit is not reported as a crash. CI's hang of the
// embedded broker (issue 28) left nothing to read but "i/o timeout" lines.
func (h *harness) dumpGoroutines(why string) {
	path := filepath.Join(h.cfg.WorkDir, "goroutines-harness.txt")
	if f, err := os.Create(path); err != nil {
		h.logger.Warn("eos: writing the harness's goroutines", "error", err)
	} else {
		err := pprof.Lookup("goroutine").WriteTo(f, 2)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			h.logger.Warn("eos: writing the harness's goroutines", "error", err)
		}
	}
	var dumped []*process
	for _, in := range h.instances {
		if p := in.proc; p != nil && !p.exited() {
			p.expected = true
			p.dumped = true
			_ = p.signal(syscall.SIGCONT)
			_ = p.signal(syscall.SIGQUIT)
			dumped = append(dumped, p)
		}
	}
	for _, p := range dumped {
		p.wait(30 * time.Second)
	}
	h.logger.Warn("eos: goroutines dumped", "why", why, "harness", path, "instances", len(dumped))
}
