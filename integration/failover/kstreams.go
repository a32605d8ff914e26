//go:build linux

package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// -impl kstreams runs Kafka Streams 4.1.1 as the children (issue 24 item 6: Kafka
// Streams measured beside eddy on the same test): the Maven project under kstreams/
// (embedded here) is the same key-value application and prints the same event lines
// on stdout (see its Main.java), so the driver measures both alike.

//go:embed kstreams/pom.xml kstreams/src
var kstreamsProject embed.FS

// impl is which application a child runs.
type impl struct {
	// Java and Classpath run the Kafka Streams application; empty: eddy (this binary).
	Java, Classpath string
	// SessionTimeoutMs is Kafka Streams' consumer session.timeout.ms; 0 leaves its
	// default (45 s; eddy's is 10 s).
	SessionTimeoutMs int
}

func (im impl) String() string {
	if im.Classpath == "" {
		return "eddy"
	}
	if im.SessionTimeoutMs == 0 {
		return "kstreams"
	}
	return fmt.Sprintf("kstreams(session.timeout.ms=%d)", im.SessionTimeoutMs)
}

// buildImpl returns the impl -impl names; for kstreams it builds the Kafka Streams
// application in work with `mvn -q -B package` (Maven Central, or ~/.m2).
func buildImpl(ctx context.Context, name, work string, sessionTimeoutMs int) (impl, error) {
	switch name {
	case "eddy":
		return impl{}, nil
	case "kstreams":
	default:
		return impl{}, fmt.Errorf("-impl %q: want eddy or kstreams", name)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return impl{}, fmt.Errorf("-impl kstreams needs Java 17+ on PATH: %w", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return impl{}, fmt.Errorf("-impl kstreams needs Maven (mvn) on PATH to build integration/failover/kstreams: %w", err)
	}
	sub, err := fs.Sub(kstreamsProject, "kstreams")
	if err != nil {
		return impl{}, err
	}
	dir := filepath.Join(work, "kstreams-build")
	if err := os.CopyFS(dir, sub); err != nil {
		return impl{}, fmt.Errorf("copy the Kafka Streams project: %w", err)
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "package")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return impl{}, fmt.Errorf("`mvn -q -B package` in %s failed (it needs Maven Central or the artifacts in ~/.m2): %w\n%s", dir, err, out)
	}
	cp, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		return impl{}, fmt.Errorf("the Kafka Streams build wrote no classpath: %w", err)
	}
	log.Printf("built the Kafka Streams application in %v", time.Since(began).Round(time.Second))
	return impl{
		Java:             java,
		Classpath:        filepath.Join(dir, "target", "kstreams-failover.jar") + ":" + strings.TrimSpace(string(cp)),
		SessionTimeoutMs: sessionTimeoutMs,
	}, nil
}

// childCommand is the command that runs s: this binary with -child and the spec, or
// the Kafka Streams application with the spec's fields as arguments.
func childCommand(self string, s spec, specJSON []byte) *exec.Cmd {
	if s.Impl.Classpath == "" {
		return exec.Command(self, "-child", string(specJSON))
	}
	instance := s.InstanceID
	if instance == "" {
		instance = "-"
	}
	return exec.Command(s.Impl.Java, "-Xmx512m", "-cp", s.Impl.Classpath, "io.github.eddystreams.failover.Main",
		strings.Join(s.Brokers, ","), s.App, s.Input, s.StateDir, strconv.Itoa(s.Standbys), instance,
		strconv.Itoa(s.Impl.SessionTimeoutMs))
}

// waitFormed waits until every one of children runs tasks and every task of the
// input's partitions runs somewhere: the group has formed. The drivers start the
// instances on the empty input and load the keys after this, so that every instance
// starts with the same (empty) state: Kafka Streams' assignor keeps a task on the
// instance whose state is within acceptable.recovery.lag (10,000 records) and gives
// the others warm-up replicas, moving the task only at a probing rebalance 10 minutes
// later; loaded first, the first instance to join would run every task that long.
func waitFormed(children []*proc, partitions int32, limit time.Duration) error {
	began := time.Now()
	for {
		time.Sleep(200 * time.Millisecond)
		tasks := map[string]bool{}
		busy := 0
		for _, p := range children {
			a := p.status().Active
			if len(a) > 0 {
				busy++
			}
			for _, t := range a {
				tasks[t] = true
			}
		}
		if busy == len(children) && len(tasks) == int(partitions) {
			log.Printf("the group of %d instances formed in %v", len(children), time.Since(began).Round(time.Millisecond))
			return nil
		}
		if time.Since(began) > limit {
			return fmt.Errorf("the %d instances did not all run tasks within %v (%d of %d tasks running)", len(children), limit, len(tasks), partitions)
		}
	}
}
