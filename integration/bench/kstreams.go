//go:build linux

package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The Kafka Streams rows run the Maven project under kstreams/ (embedded here) as their
// child: the same topology as eddy's row, on the same broker and input, measured from
// outside alike (committed offsets, CPU time and VmHWM of the process); the JVM
// reports its sockets, descriptors and threads on SIGTERM as an eddy child does.

//go:embed kstreams/pom.xml kstreams/src
var kstreamsProject embed.FS

// kstreamsApp is the built Kafka Streams application: its jar and dependencies.
type kstreamsApp struct {
	java, classpath string
}

// needKStreams builds the Kafka Streams application once per invocation, in the work
// directory, with `mvn -q -B package` (Maven Central, or the local repository).
func (e *env) needKStreams(ctx context.Context) (*kstreamsApp, error) {
	if e.ks != nil {
		return e.ks, nil
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams rows need Java 17+ on PATH: %w", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams rows need Maven (mvn) on PATH to build integration/bench/kstreams: %w", err)
	}
	dir := filepath.Join(e.work, "kstreams-build")
	_ = os.RemoveAll(dir)
	sub, err := fs.Sub(kstreamsProject, "kstreams")
	if err != nil {
		return nil, err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return nil, fmt.Errorf("copy the Kafka Streams project: %w", err)
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "package")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("`mvn -q -B package` in %s failed (it needs Maven Central or the artifacts in ~/.m2): %w\n%s", dir, err, out)
	}
	cp, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams build wrote no classpath: %w", err)
	}
	e.ks = &kstreamsApp{java: java, classpath: filepath.Join(dir, "target", "kstreams-bench.jar") + ":" + strings.TrimSpace(string(cp))}
	e.logf("  built the Kafka Streams application in %v", time.Since(began).Round(time.Second))
	return e.ks, nil
}

// command is the child's command line for spec.
func (k *kstreamsApp) command(spec childSpec) []string {
	return []string{
		k.java, "-cp", k.classpath, "io.github.eddystreams.bench.Main",
		strings.Join(spec.Brokers, ","), spec.Group, spec.Input, spec.Output,
		strconv.FormatInt(spec.CommitInterval.Milliseconds(), 10), spec.StateDir, spec.Topology,
		strconv.Itoa(max(spec.Threads, 1)),
	}
}
