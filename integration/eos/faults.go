//go:build unix

package eos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"time"
)

// FaultKind is what a fault does.
type FaultKind int

const (
	// Kill sends SIGKILL to an instance, keeps its state dir, and restarts it.
	Kill FaultKind = iota
	// Term sends SIGTERM (a clean stop) to an instance and restarts it.
	Term
	// Pause sends SIGSTOP to an instance for longer than its session timeout, so the
	// group gives its tasks away, then SIGCONT: the instance comes back as a zombie.
	Pause
	// BrokerKill kills the broker with SIGKILL (kill -9) and restarts it, keeping its
	// data.
	BrokerKill
	// Stall sends SIGSTOP to an instance for longer than its transaction timeout but
	// shorter than its session timeout, then SIGCONT: the group keeps the instance
	// while the transaction coordinator aborts its open transactions. It needs a
	// session timeout well above the transaction timeout. Counted with the pauses.
	Stall
)

func (k FaultKind) String() string {
	switch k {
	case Kill:
		return "kill"
	case Term:
		return "term"
	case Pause:
		return "pause"
	case BrokerKill:
		return "broker-kill"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// ParseFaultKind reads a FaultKind's name.
func ParseFaultKind(s string) (FaultKind, error) {
	for _, k := range []FaultKind{Kill, Term, Pause, BrokerKill, Stall} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("eos: unknown fault kind %q (want kill, term, pause, stall or broker-kill)", s)
}

// Fault is one planned fault: at At after the start (or as soon as the previous fault
// is over), do Kind to Instance, which stays down (stopped, paused, or the broker)
// for Down.
type Fault struct {
	At       time.Duration
	Kind     FaultKind
	Instance int
	Down     time.Duration
	// After is the least time from the end of this fault to the next.
	After time.Duration
}

func (f Fault) String() string {
	if f.Kind == BrokerKill {
		return fmt.Sprintf("at %v: %s, down %v", f.At.Round(time.Millisecond), f.Kind, f.Down.Round(time.Millisecond))
	}
	return fmt.Sprintf("at %v: %s instance %d, down %v", f.At.Round(time.Millisecond), f.Kind, f.Instance, f.Down.Round(time.Millisecond))
}

// PlanConfig describes a fault schedule.
type PlanConfig struct {
	Seed uint64
	// Faults is the number of instance faults, of Kinds (each kind at least once when
	// Faults allows); BrokerRestarts the number of broker kills on top.
	Faults         int
	Kinds          []FaultKind
	BrokerRestarts int
	Instances      int
	// Gap is the mean time between the end of one fault (the victim back) and the
	// next; each gap is drawn from [Gap/2, 3*Gap/2). Default 3 s.
	Gap time.Duration
	// Pause is the least time a paused instance stays stopped (past its session
	// timeout); it stays up to 3 s longer.
	Pause time.Duration
	// StallMin and StallMax bound how long a stalled instance stays stopped.
	StallMin, StallMax time.Duration
}

// PlanFaults makes a random schedule from the seed: the same configuration always
// gives the same schedule. Faults follow one another: each starts a gap after the
// previous one is planned to be over. The second result is when the last one is
// planned to be over, plus a gap.
func PlanFaults(c PlanConfig) ([]Fault, time.Duration) {
	rng := rand.New(rand.NewPCG(c.Seed, 0x6661756c74))
	kinds := c.Kinds
	if len(kinds) == 0 {
		kinds = []FaultKind{Kill, Term, Pause}
	}
	if c.Gap <= 0 {
		c.Gap = 3 * time.Second
	}
	// Every kind at least once when there are enough faults, the rest at random, all
	// in random order.
	var seq []FaultKind
	if c.Faults >= len(kinds) {
		seq = append(seq, kinds...)
	}
	for len(seq) < c.Faults {
		seq = append(seq, kinds[rng.IntN(len(kinds))])
	}
	rng.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
	// Broker kills go to random places, never first.
	for range c.BrokerRestarts {
		i := 0
		if len(seq) > 0 {
			i = 1 + rng.IntN(len(seq))
		}
		seq = append(seq[:i], append([]FaultKind{BrokerKill}, seq[i:]...)...)
	}
	gap := func() time.Duration { return c.Gap/2 + time.Duration(rng.Int64N(int64(c.Gap))) }
	out := make([]Fault, 0, len(seq))
	at := gap()
	for _, k := range seq {
		f := Fault{At: at, Kind: k}
		// overhead: the time a fault takes beyond its down time (a clean stop, a
		// restart, a broker start).
		overhead := time.Second
		switch k {
		case Pause:
			f.Down = c.Pause + time.Duration(rng.Int64N(int64(3*time.Second)))
			overhead = 0
		case Stall:
			f.Down = c.StallMin + time.Duration(rng.Int64N(int64(max(c.StallMax-c.StallMin, 1))))
			overhead = 0
		case BrokerKill:
			f.Down = 2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
			overhead = 10 * time.Second
		default:
			f.Down = 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
		}
		if k != BrokerKill && c.Instances > 0 {
			f.Instance = rng.IntN(c.Instances)
		}
		f.After = gap()
		out = append(out, f)
		at += f.Down + overhead + f.After
	}
	return out, at
}

// BrokerControl kills and restarts the broker, for the BrokerKill fault.
type BrokerControl interface {
	// Kill stops the broker at once (SIGKILL), keeping its data.
	Kill(ctx context.Context) error
	// Restart starts it again on its data and returns when it serves.
	Restart(ctx context.Context) error
}

// ScriptBroker controls a broker with integration/kafka.sh (kill9, restart, start,
// stop). Env is added to the script's environment (EDDY_KAFKA_HOME,
// EDDY_KAFKA_PORT, EDDY_KAFKA_CONTROLLER_PORT, ...).
type ScriptBroker struct {
	Script string
	Env    []string
}

func (s ScriptBroker) run(ctx context.Context, arg string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Script, arg)
	cmd.Env = append(os.Environ(), s.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("eos: %s %s: %w\n%s", s.Script, arg, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts a fresh broker (its data dir is wiped) and returns its address.
func (s ScriptBroker) Start(ctx context.Context) (string, error) { return s.run(ctx, "start") }

// Stop stops the broker.
func (s ScriptBroker) Stop(ctx context.Context) error {
	_, err := s.run(ctx, "stop")
	return err
}

// Kill implements BrokerControl with "kafka.sh kill9".
func (s ScriptBroker) Kill(ctx context.Context) error {
	_, err := s.run(ctx, "kill9")
	return err
}

// Restart implements BrokerControl with "kafka.sh restart" (keeps the data dir).
func (s ScriptBroker) Restart(ctx context.Context) error {
	_, err := s.run(ctx, "restart")
	return err
}
