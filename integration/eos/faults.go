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

	// The cluster faults (they need Config.Cluster, a three-broker cluster) aim at the
	// broker that holds a role at the moment of the fault (looked up with the metadata
	// and FindCoordinator requests), kill it with SIGKILL and restart it on its data.

	// KillInputLeader kills the leader of an input partition.
	KillInputLeader
	// KillChangelogLeader kills the leader of a changelog partition.
	KillChangelogLeader
	// KillOutputLeader kills the leader of an output partition.
	KillOutputLeader
	// KillTxnCoordinator kills the transaction coordinator of a task's transactional ID.
	KillTxnCoordinator
	// KillGroupCoordinator kills the application's group coordinator.
	KillGroupCoordinator
	// PauseBroker sends SIGSTOP to a broker for longer than its broker session (the
	// controller fences it and moves its leaderships away), then SIGCONT: it comes back
	// with stale state, as a broker after a long GC pause.
	PauseBroker
	// TwoBrokersDown kills two brokers at once and restarts both: partitions fall below
	// min.insync.replicas and the controller quorum is lost, so producers must wait.
	TwoBrokersDown

	// MoveTwice stalls an instance inside a commit (it stops itself with SIGSTOP as it
	// sends AddOffsetsToTxn: its transaction holds output, changelog and offsets records,
	// its offsets not yet committed), and once the group gave its tasks away (past its
	// session timeout) stops another instance with SIGTERM and restarts it: the stalled
	// owner's tasks move a second time while its transaction is still open (issue 22).
	// Then the stalled instance resumes, a zombie. It needs three instances and a
	// transaction timeout past the whole fault. Counted with the pauses and the stops.
	MoveTwice

	// The sink faults (they need Config.Postgres): an instance kills itself with
	// SIGKILL at a step of the sink protocol (sinktxn.SetFaultHook; the first instance
	// to reach the step after the harness armed it), and is restarted like a killed
	// one.

	// KillAfterPrepare: a task's two-phase sink transactions prepared, the Kafka
	// transaction not committed.
	KillAfterPrepare
	// KillAfterKafkaCommit: the Kafka transaction committed, its sink transactions
	// still prepared, the stores not flushed.
	KillAfterKafkaCommit
	// KillBeforeCommitPrepared: the post-commit about to COMMIT PREPARED (the stores
	// flushed).
	KillBeforeCommitPrepared
	// KillInRecovery: first a KillAfterPrepare, then, while its prepared transaction
	// waits for the recovery of its task, the instance that recovers it is killed
	// before it commits or rolls it back.
	KillInRecovery
	// PostgresCrash stops PostgreSQL at once (pg_ctl stop -m immediate) and starts it
	// again on its data dir (Config.Postgres.Control); like BrokerKill, not aimed at an
	// instance.
	PostgresCrash

	// Replace is a stalled zombie with a static ID (it needs Config.Static): the
	// instance stops (SIGSTOP, inside a commit when it can: its stall file), and while
	// it is stopped, within its session timeout, a replacement starts in its place with
	// the same InstanceID, as a new pod on another host would, on a state dir of its
	// own: the first replacement of a run on an empty one (a host without the volume:
	// another instance ID in the state dir, so other transactional IDs, and what must
	// fence the zombie is its member ID), the next on a copy of the zombie's state dir
	// taken while it is stopped (a snapshot of the volume: the same instance ID, so the
	// replacement's producers fence the zombie's), and so on alternately. Once the
	// replacement runs tasks, the zombie resumes; it must be fenced and stop. Counted
	// with the pauses.
	Replace
)

// SinkFaultKinds are the fault kinds at the steps of the sink protocol.
func SinkFaultKinds() []FaultKind {
	return []FaultKind{KillAfterPrepare, KillAfterKafkaCommit, KillBeforeCommitPrepared, KillInRecovery}
}

// IsSinkFault reports whether k is one of SinkFaultKinds.
func (k FaultKind) IsSinkFault() bool { return k >= KillAfterPrepare && k <= KillInRecovery }

// ClusterFaultKinds are the fault kinds aimed at a three-broker cluster.
func ClusterFaultKinds() []FaultKind {
	return []FaultKind{KillInputLeader, KillChangelogLeader, KillOutputLeader, KillTxnCoordinator, KillGroupCoordinator, PauseBroker, TwoBrokersDown}
}

// IsClusterFault reports whether k is one of ClusterFaultKinds.
func (k FaultKind) IsClusterFault() bool { return k >= KillInputLeader && k <= TwoBrokersDown }

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
	case KillInputLeader:
		return "kill-input-leader"
	case KillChangelogLeader:
		return "kill-changelog-leader"
	case KillOutputLeader:
		return "kill-output-leader"
	case KillTxnCoordinator:
		return "kill-txn-coordinator"
	case KillGroupCoordinator:
		return "kill-group-coordinator"
	case PauseBroker:
		return "pause-broker"
	case TwoBrokersDown:
		return "two-brokers-down"
	case MoveTwice:
		return "move-twice"
	case KillAfterPrepare:
		return "kill-after-prepare"
	case KillAfterKafkaCommit:
		return "kill-after-kafka-commit"
	case KillBeforeCommitPrepared:
		return "kill-before-commit-prepared"
	case KillInRecovery:
		return "kill-in-recovery"
	case PostgresCrash:
		return "postgres-crash"
	case Replace:
		return "replace"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// ParseFaultKind reads a FaultKind's name.
func ParseFaultKind(s string) (FaultKind, error) {
	all := append([]FaultKind{Kill, Term, Pause, BrokerKill, Stall, MoveTwice, PostgresCrash, Replace}, ClusterFaultKinds()...)
	all = append(all, SinkFaultKinds()...)
	names := make([]string, len(all))
	for i, k := range all {
		if k.String() == s {
			return k, nil
		}
		names[i] = k.String()
	}
	return 0, fmt.Errorf("eos: unknown fault kind %q (want one of %s)", s, strings.Join(names, ", "))
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
	// Target picks, for a cluster fault, among the partitions, tasks or brokers it
	// could aim at.
	Target int
}

func (f Fault) String() string {
	if f.Kind.IsClusterFault() {
		return fmt.Sprintf("at %v: %s (target %d), down %v", f.At.Round(time.Millisecond), f.Kind, f.Target, f.Down.Round(time.Millisecond))
	}
	if f.Kind == BrokerKill || f.Kind == PostgresCrash || f.Kind.IsSinkFault() {
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
	// ClusterFaults faults of ClusterKinds (default ClusterFaultKinds; each at least
	// once when ClusterFaults allows) go on top, at random places, never first.
	// BrokerPause is the least time a paused broker stays stopped (past its broker
	// session); it stays up to 3 s longer.
	ClusterFaults int
	ClusterKinds  []FaultKind
	BrokerPause   time.Duration
	// PostgresCrashes go on top, at random places, never first, drawn from a
	// generator of their own.
	PostgresCrashes int
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
	// Cluster faults likewise, after the broker kills, drawn from a generator of their
	// own: the instance and broker faults of a seed stay what they were without them.
	crng := rand.New(rand.NewPCG(c.Seed, 0x636c7573746572))
	if c.ClusterFaults > 0 {
		ckinds := c.ClusterKinds
		if len(ckinds) == 0 {
			ckinds = ClusterFaultKinds()
		}
		var cseq []FaultKind
		if c.ClusterFaults >= len(ckinds) {
			cseq = append(cseq, ckinds...)
		}
		for len(cseq) < c.ClusterFaults {
			cseq = append(cseq, ckinds[crng.IntN(len(ckinds))])
		}
		crng.Shuffle(len(cseq), func(i, j int) { cseq[i], cseq[j] = cseq[j], cseq[i] })
		for _, k := range cseq {
			i := 0
			if len(seq) > 0 {
				i = 1 + crng.IntN(len(seq))
			}
			seq = append(seq[:i], append([]FaultKind{k}, seq[i:]...)...)
		}
	}
	prng := rand.New(rand.NewPCG(c.Seed, 0x706763726173))
	for range c.PostgresCrashes {
		i := 0
		if len(seq) > 0 {
			i = 1 + prng.IntN(len(seq))
		}
		seq = append(seq[:i], append([]FaultKind{PostgresCrash}, seq[i:]...)...)
	}
	gapOf := func(r *rand.Rand) time.Duration { return c.Gap/2 + time.Duration(r.Int64N(int64(c.Gap))) }
	gap := func() time.Duration { return gapOf(rng) }
	out := make([]Fault, 0, len(seq))
	at := gap()
	for _, k := range seq {
		f := Fault{At: at, Kind: k}
		if k.IsClusterFault() {
			f.Target = crng.IntN(1 << 30)
			f.Down = 2*time.Second + time.Duration(crng.Int64N(int64(4*time.Second)))
			// A broker start, and the cluster healing before the next fault.
			overhead := 15 * time.Second
			if k == PauseBroker {
				f.Down = c.BrokerPause + time.Duration(crng.Int64N(int64(3*time.Second)))
				overhead = 5 * time.Second
			}
			f.After = gapOf(crng)
			out = append(out, f)
			at += f.Down + overhead + f.After
			continue
		}
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
		case MoveTwice:
			// Past the session timeout (Pause), then the other instance's stop and
			// restart, then a few seconds more with the tasks on the third instance.
			f.Down = c.Pause + moveTwiceAfterPause + time.Duration(rng.Int64N(int64(3*time.Second)))
			f.Target = rng.IntN(1 << 30)
			overhead = time.Second
		case BrokerKill:
			f.Down = 2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
			overhead = 10 * time.Second
		case PostgresCrash:
			// The crash and the restart (WAL recovery) take what they take; Down is
			// not used.
			overhead = 3 * time.Second
		case Replace:
			// Down: how long the zombie stays stopped once its replacement runs tasks.
			// overhead: the stall (the next commit), the replacement's start and join,
			// the zombie's end: 3.1 s beyond Down in a first run on real Kafka (seed
			// 101, commit interval 100 ms).
			f.Down = time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
			overhead = 4 * time.Second
		case KillInRecovery:
			// Two kills, the second after the task's move (a session timeout).
			f.Down = 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
			overhead = c.Pause
		default:
			f.Down = 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
		}
		if k != BrokerKill && k != PostgresCrash && c.Instances > 0 {
			f.Instance = rng.IntN(c.Instances)
		}
		f.After = gap()
		out = append(out, f)
		at += f.Down + overhead + f.After
	}
	return out, at
}

// moveTwiceAfterPause is how long a MoveTwice victim stays stopped, at least, after the
// group gave its tasks away: the second instance's stop (a clean one, up to a few
// seconds) and restart, and the third instance's restore.
const moveTwiceAfterPause = 8 * time.Second

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

func (s ScriptBroker) run(ctx context.Context, arg string, more ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Script, append([]string{arg}, more...)...)
	cmd.Env = append(os.Environ(), s.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("eos: %s %s: %w\n%s", s.Script, strings.Join(append([]string{arg}, more...), " "), err, stderr.String())
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
