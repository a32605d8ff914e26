//go:build unix

package eos

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// generation is the newest group generation any instance process logged an
// assignment in (0: none yet).
func (h *harness) generation() int32 {
	var g int32
	for _, in := range h.instances {
		for _, p := range in.processes() {
			for _, x := range p.assignmentGenerations() {
				g = max(g, x)
			}
		}
	}
	return g
}

// checkRejoin waits, up to restartTimeout, for the first assignment of p, a static
// member restarted (or replaced) after a fault, and counts whether it came in the
// generation the group had before the fault, gen0 (Result.StaticRejoins: the
// coordinator replaced the member and gave it its tasks back without a rebalance), or
// in a newer one (Result.RejoinRebalances: the restart took longer than the session
// timeout, or another fault moved the group on).
func (h *harness) checkRejoin(ctx context.Context, p *process, gen0 int32) error {
	deadline := time.Now().Add(restartTimeout)
	for {
		if gens := p.assignmentGenerations(); len(gens) > 0 {
			if gens[0] <= gen0 {
				h.res.StaticRejoins++
				h.logger.Info("eos: static member back without a rebalance", "process", p.name, "generation", gens[0], "at", h.elapsed())
			} else {
				h.res.RejoinRebalances++
				h.logger.Info("eos: static member back in a new generation", "process", p.name, "generation", gens[0], "before", gen0, "at", h.elapsed())
			}
			return nil
		}
		if p.exited() || time.Now().After(deadline) {
			h.logger.Info("eos: restarted static member took no assignment yet; going on", "process", p.name, "after", restartTimeout)
			return nil
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+100*time.Millisecond); err != nil {
			return err
		}
	}
}

// replace runs the Replace fault on instance in: a stalled zombie and its replacement
// with the same InstanceID (see Replace).
//
// A real one: a pod stalls (a long GC pause, a node cut off), Kubernetes starts its
// replacement, with the same pod name and so the same InstanceID, on another host while
// the old process still lives, and the old one resumes later. The two cannot share a
// state dir (its lock; and on another host it is another disk), so the replacement gets
// its own: empty (the volume did not follow: another instance ID in the state dir, so
// other transactional IDs, and only the group's member ID tells the zombie's commits
// from the replacement's), or a copy of the zombie's taken while it is stopped (a
// snapshot of the volume: the same instance ID, so the replacement's producers fence
// the zombie's transactions). The zombie keeps its own dir, which is checked at the end
// like every state dir.
func (h *harness) replace(ctx context.Context, f Fault, in *instance) error {
	z := in.proc
	gen0 := h.generation()
	inCommit, err := h.stallInCommit(ctx, z, in.cfg.StallFile)
	if err != nil {
		return err
	}
	if !inCommit {
		h.logger.Warn("eos: no commit of the instance caught within 30 s; stopping it where it is", "instance", z.name)
		if err := z.signal(syscall.SIGSTOP); err != nil {
			return err
		}
	}
	z.expected = true
	h.res.Pauses++
	if inCommit {
		h.res.StalledInCommit++
	}
	fresh := h.res.Replacements%2 == 0
	h.res.Replacements++
	zdir := in.cfg.StateDir
	dir := filepath.Join(h.cfg.WorkDir, fmt.Sprintf("state-%s-r%d", in.cfg.Name, h.res.Replacements))
	if fresh {
		h.res.FreshReplacements++
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("eos: replacement state dir: %w", err)
		}
	} else if err := copyDir(zdir, dir); err != nil {
		return fmt.Errorf("eos: copying %s's state dir: %w", z.name, err)
	}
	h.zombieDirs = append(h.zombieDirs, zdir)
	in.cfg.StateDir = dir
	h.logger.Info("eos: replacing a stalled zombie", "zombie", z.name, "inside_commit", inCommit, "instance_id", in.cfg.InstanceID,
		"state_dir", map[bool]string{true: "empty", false: "copied"}[fresh], "at", h.elapsed())
	if err := in.start(nil); err != nil {
		return err
	}
	if !fresh {
		// The copy is what a crash leaves (the zombie stopped wherever it was): the
		// replacement's restores are checked as after a SIGKILL. Read from the zombie's
		// dir, the same files while it stays stopped, after the start: reading is slow
		// and the replacement must join within the session timeout.
		snaps, err := ReadStateDir(zdir, h.names.App)
		if err != nil {
			h.anomaly("%s: state dir unreadable: %v", z.name, err)
		}
		in.proc.afterKill = checkpoints(snaps)
	}
	if err := h.checkRejoin(ctx, in.proc, gen0); err != nil {
		return err
	}
	if err := h.sleepUntil(ctx, time.Since(h.began)+f.Down); err != nil {
		return err
	}
	if err := z.signal(syscall.SIGCONT); err != nil {
		return err
	}
	h.logger.Info("eos: zombie resumed", "zombie", z.name, "at", h.elapsed())
	return h.waitZombie(ctx, z)
}

// zombieTimeout bounds the wait for a resumed zombie to stop: it heartbeats within a
// fifth of its session timeout and is told it was fenced.
const zombieTimeout = 30 * time.Second

// fencedInstanceText is in the error the runtime stops with when another member took
// its InstanceID (eddy's fencedInstanceErr).
const fencedInstanceText = "another instance joined with the same InstanceID and replaced this one"

// waitZombie waits for a resumed zombie to stop on being fenced; anything else is an
// anomaly.
func (h *harness) waitZombie(ctx context.Context, z *process) error {
	deadline := time.Now().Add(zombieTimeout)
	for !z.exited() {
		if time.Now().After(deadline) {
			h.anomaly("zombie %s still runs %v after it resumed (its InstanceID taken by a replacement); killing it; last log lines:\n%s", z.name, zombieTimeout, z.lastLines())
			_ = z.signal(syscall.SIGKILL)
			z.wait(30 * time.Second)
			return nil
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+100*time.Millisecond); err != nil {
			return err
		}
	}
	if !strings.Contains(z.lastLines(), fencedInstanceText) {
		h.anomaly("zombie %s exited with %v, not on being fenced as a replaced static member; last log lines:\n%s", z.name, z.err, z.lastLines())
		return nil
	}
	h.res.ZombiesFenced++
	h.logger.Info("eos: zombie fenced and stopped", "zombie", z.name, "at", h.elapsed())
	return nil
}

// copyDir copies the regular files and dirs under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, to)
		}
		return nil
	})
}
