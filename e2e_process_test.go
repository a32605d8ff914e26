package eddy_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// The test binary doubles as an eddy instance when EDDY_CHILD is set, so tests can run
// instances as separate OS processes and stop, kill or pause them.
func TestMain(m *testing.M) {
	if os.Getenv("EDDY_CHILD") == "wordcount" {
		os.Exit(childWordCount())
	}
	os.Exit(m.Run())
}

func childWordCount() int {
	env := func(k string) string { return os.Getenv("EDDY_CHILD_" + k) }
	topo, err := wordcount.TopologyFor(env("INPUT"), env("OUTPUT"), wordcount.NoCaching()) // every count: the tests check 1..n
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	commit, _ := strconv.Atoi(env("COMMIT_MS"))
	session, _ := strconv.Atoi(env("SESSION_MS"))
	cfg := eddy.Config{
		ApplicationID:  env("APP"),
		Brokers:        strings.Split(env("BROKERS"), ","),
		StateDir:       env("STATE_DIR"),
		CommitInterval: time.Duration(commit) * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if session > 0 {
		cfg.Sarama = func(c *sarama.Config) {
			c.Consumer.Group.Session.Timeout = time.Duration(session) * time.Millisecond
			c.Consumer.Group.Heartbeat.Interval = time.Duration(session) * time.Millisecond / 5
		}
	}
	app, err := eddy.New(topo, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := app.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// child is an instance running as a process.
type child struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// wait waits for the process to end and returns its exit error.
func (c *child) wait(timeout time.Duration) (error, bool) {
	select {
	case <-c.done:
		return c.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

func (c *child) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func startChild(t *testing.T, e *wcEnv, stateDir string, commit, session time.Duration) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"EDDY_CHILD=wordcount",
		"EDDY_CHILD_APP="+e.appID,
		"EDDY_CHILD_BROKERS="+strings.Join(e.c.Addrs(), ","),
		"EDDY_CHILD_INPUT="+e.input,
		"EDDY_CHILD_OUTPUT="+e.output,
		"EDDY_CHILD_STATE_DIR="+stateDir,
		fmt.Sprintf("EDDY_CHILD_COMMIT_MS=%d", commit.Milliseconds()),
		fmt.Sprintf("EDDY_CHILD_SESSION_MS=%d", session.Milliseconds()),
	)
	c := &child{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = c
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		if t.Failed() {
			// A child that is still running when its test failed may be stuck: SIGQUIT
			// makes the Go runtime print every goroutine's stack before it exits.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			c.wait(10 * time.Second)
		}
		_ = cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("child log:\n%s", c.log())
		}
	})
	return c
}

// An instance paused (SIGSTOP) past its session timeout loses its tasks; when it
// resumes, its producers are fenced and nothing it writes is visible to read_committed
// readers: the output stays exactly once.
func TestZombieIsFenced(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		session := 3 * time.Second
		zombie := startChild(t, e, t.TempDir(), 2*time.Second, session)
		cfg := e.config(t)
		cfg.Sarama = func(sc *sarama.Config) {
			sc.Consumer.Group.Session.Timeout = session
			sc.Consumer.Group.Heartbeat.Interval = session / 5
		}
		healthy := start(t, e.topo, cfg)
		waitFor(t, time.Minute, "the instances to share the tasks", func() (bool, error) {
			n := len(healthy.app.Tasks())
			return n > 0 && n < 8, nil
		})
		// Keep input flowing so the zombie has a transaction open when it stops.
		stopFeed := make(chan struct{})
		fed := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stopFeed:
					fed <- nil
					return
				default:
				}
				if err := e.produceErr(20); err != nil {
					fed <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		// Both instances must be processing, not still preparing their tasks, when the
		// zombie stops: a zombie stopped before its first transaction has nothing to
		// commit when it wakes, so no commit of its is refused (CI saw it rejoin quietly).
		// Every input partition's committed offset must move past where it stood once
		// the feed began.
		before, err := c.CommittedOffsets(ctxT(t), e.appID, e.input)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "both instances to commit input", func() (bool, error) {
			now, err := c.CommittedOffsets(ctxT(t), e.appID, e.input)
			if err != nil {
				return false, err
			}
			for p := range int32(4) {
				if now[p] <= max(before[p], 0) {
					return false, nil
				}
			}
			return true, nil
		})
		time.Sleep(500 * time.Millisecond)
		if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the healthy instance to take every task", func() (bool, error) {
			return len(healthy.app.Tasks()) == 8, nil
		})
		time.Sleep(time.Second)
		if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the zombie to notice it was fenced", func() (bool, error) {
			l := zombie.log()
			return strings.Contains(l, "task migrated") || strings.Contains(l, "fenced"), nil
		})
		time.Sleep(2 * time.Second)
		close(stopFeed)
		if err := <-fed; err != nil {
			t.Fatal(err)
		}
		e.waitCounts(t, 2*time.Minute, "the counts")
		_ = zombie.cmd.Process.Signal(syscall.SIGTERM)
		if _, ok := zombie.wait(time.Minute); !ok {
			t.Fatal("the zombie did not stop on SIGTERM")
		}
		if err := healthy.stop(); err != nil {
			t.Fatal(err)
		}
		e.checkExactlyOnce(t)
	})
}
