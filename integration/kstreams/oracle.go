package kstreams

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The oracle's Maven project, built by Start in a cache directory (never in the source tree).
//
//go:embed oracle/pom.xml oracle/src
var oracleSources embed.FS

// Errors of the oracle.
var (
	// ErrBuild: the oracle's jar could not be built (no java or mvn, or Maven failed,
	// typically because Maven Central is unreachable and ~/.m2 is cold).
	ErrBuild = errors.New("kstreams: cannot build the Kafka Streams oracle")
	// ErrRejected: the oracle answered a request with an error (a bad request, or an
	// exception inside Kafka Streams); the JVM is still usable.
	ErrRejected = errors.New("kstreams: the oracle rejected the request")
	// ErrDead: the oracle's JVM has exited or was stopped; start a new one.
	ErrDead = errors.New("kstreams: the oracle is not running")
)

// Options tune Start; the zero value works.
type Options struct {
	// CacheDir holds the built oracle, one subdirectory per version of its sources;
	// default <os.UserCacheDir>/eddy/kstreams-oracle.
	CacheDir string
	// Stderr, when set, receives the JVM's stderr as well (it is always kept, its tail
	// quoted in errors).
	Stderr io.Writer
}

// Oracle is one running JVM with the Kafka Streams topologies. It is safe for
// concurrent use; requests are served one at a time.
type Oracle struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte // answers, closed at the end of the JVM's stdout
	stderr  *tailBuffer
	exited  chan struct{}
	waitErr error

	mu     sync.Mutex
	broken error // set once the JVM is unusable
}

// Start builds the oracle if its cache holds no jar for the current sources, then starts
// its JVM. ctx bounds the build and the start, not the JVM's life: Close ends it.
func Start(ctx context.Context, opts Options) (*Oracle, error) {
	classpath, err := Build(ctx, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	java, err := javaBinary()
	if err != nil {
		return nil, err
	}
	o := &Oracle{
		lines:  make(chan []byte),
		stderr: &tailBuffer{max: 64 << 10, also: opts.Stderr},
		exited: make(chan struct{}),
	}
	// One thread of GC: the machine is shared, and requests are small. The JIT stops at
	// C1: an oracle lives for one test package, and C2's compiling cost more CPU than
	// it saved (integration/kstreams/eddytopo, -race, on an idle machine: 128 busy
	// CPU-seconds of the machine with both compilers, 83 with C1 only, wall time the
	// same).
	o.cmd = exec.Command(java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m", "-Duser.language=en", "-cp", classpath, mainClass)
	o.cmd.Stderr = o.stderr
	o.stdin, err = o.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := o.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := o.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kstreams: starting the oracle (%s -cp %s %s): %w", java, classpath, mainClass, err)
	}
	// The reader ends at the end of stdout, that is when the JVM exits (Close ends it).
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				o.lines <- line
			}
			if err != nil {
				break
			}
		}
		o.waitErr = o.cmd.Wait()
		close(o.exited)
		close(o.lines)
	}()
	return o, ctx.Err()
}

// Close ends the JVM (closing its stdin, killing it if it has not exited 10 s later)
// and waits for it.
func (o *Oracle) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.broken == nil {
		o.broken = ErrDead
	}
	o.stdin.Close()
	// Read answers nobody waits for (after a Run gave up), so the reader reaches the end
	// of stdout and waits for the JVM.
	kill := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-o.lines:
			if !ok {
				return nil
			}
		case <-kill:
			o.cmd.Process.Kill()
		}
	}
}

type wireRecord struct {
	Topic string  `json:"topic,omitempty"`
	Key   *string `json:"key"`
	Value *string `json:"value"`
	TS    int64   `json:"ts"`
}

type request struct {
	Topology string            `json:"topology"`
	Input    []wireRecord      `json:"input"`
	Config   map[string]string `json:"config,omitempty"`
}

// Case is one request to the oracle.
type Case struct {
	Topology string   // "T1" … "T10", "W1" … "W4"
	Input    []Record // piped in this order
	// Config overrides StreamsConfig properties of the driver, e.g.
	// {"statestore.cache.max.bytes": "0"} turns record caching off.
	Config map[string]string
	// ShrinkBudget bounds the runs Compare spends shrinking an input that differs:
	// 0 means 300, negative means no shrinking.
	ShrinkBudget int
	// RestartAt, when positive, restarts eddy's side (topologytest's Driver.Restart:
	// stores restored from their changelogs) before input record RestartAt; Kafka
	// Streams' side runs without a restart. A shrunk input restarts at the same index,
	// or at its end if shorter.
	RestartAt int
}

type response struct {
	Outputs map[string][]wireRecord `json:"outputs"`
	Error   string                  `json:"error"`
	Trace   string                  `json:"trace"`
}

// Run pipes input, in order, into a fresh TopologyTestDriver running topology ("T1" …
// "T7") and returns what each of its output topics received, in order. If ctx ends
// first, the JVM is killed (an answer would come too late to match its request) and
// every later Run fails with ErrDead.
func (o *Oracle) Run(ctx context.Context, topology string, input []Record) (map[string][]Record, error) {
	return o.RunCase(ctx, Case{Topology: topology, Input: input})
}

// RunCase is Run with StreamsConfig overrides.
func (o *Oracle) RunCase(ctx context.Context, c Case) (map[string][]Record, error) {
	topology := c.Topology
	req := request{Topology: topology, Input: make([]wireRecord, len(c.Input)), Config: c.Config}
	for i, r := range c.Input {
		req.Input[i] = wireRecord{Topic: r.Topic, Key: encode(r.Key), Value: encode(r.Value), TS: r.Timestamp.UnixMilli()}
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.broken != nil {
		return nil, o.broken
	}
	if _, err := o.stdin.Write(append(line, '\n')); err != nil {
		return nil, o.fail(fmt.Errorf("%w: writing a request: %v", ErrDead, err))
	}
	var answer []byte
	select {
	case l, ok := <-o.lines:
		if !ok {
			<-o.exited
			return nil, o.fail(fmt.Errorf("%w: the JVM exited (%v) without answering; its stderr ends:\n%s", ErrDead, o.waitErr, o.stderr.String()))
		}
		answer = l
	case <-ctx.Done():
		o.cmd.Process.Kill()
		return nil, o.fail(fmt.Errorf("%w: %s: no answer before %w", ErrDead, topology, context.Cause(ctx)))
	}
	var resp response
	if err := json.Unmarshal(answer, &resp); err != nil {
		return nil, fmt.Errorf("kstreams: the oracle's answer %.200q: %w", answer, err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("%w: %s: %s\n%s", ErrRejected, topology, resp.Error, resp.Trace)
	}
	out := make(map[string][]Record, len(resp.Outputs))
	for topic, recs := range resp.Outputs {
		list := make([]Record, len(recs))
		for i, w := range recs {
			k, err := decode(w.Key)
			if err != nil {
				return nil, fmt.Errorf("kstreams: the oracle's key %d on %s: %w", i, topic, err)
			}
			v, err := decode(w.Value)
			if err != nil {
				return nil, fmt.Errorf("kstreams: the oracle's value %d on %s: %w", i, topic, err)
			}
			list[i] = Record{Topic: topic, Key: k, Value: v, Timestamp: time.UnixMilli(w.TS)}
		}
		out[topic] = list
	}
	return out, nil
}

// fail marks the oracle unusable with err (o.mu is held) and returns err.
func (o *Oracle) fail(err error) error {
	o.broken = err
	return err
}

func encode(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func decode(s *string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if b == nil {
		b = []byte{} // an empty value is not a tombstone
	}
	return b, err
}

const mainClass = "io.github.eddystreams.oracle.Main"

// Build makes sure the oracle for the embedded sources is built in cacheDir (default
// <os.UserCacheDir>/eddy/kstreams-oracle) and returns the Java class path to run it:
// its jar, then its dependencies in the local Maven repository. The first build runs
// `mvn -q -B package`, which downloads Kafka Streams and the Maven plugins from Maven
// Central into ~/.m2; later builds reuse ~/.m2. A build whose dependencies have since
// left ~/.m2 is built again.
func Build(ctx context.Context, cacheDir string) (string, error) {
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: no cache directory (set HOME or XDG_CACHE_HOME, or Options.CacheDir): %v", ErrBuild, err)
		}
		cacheDir = filepath.Join(base, "eddy", "kstreams-oracle")
	}
	version, err := sourcesVersion()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, version)
	if cp, err := classpath(dir); err == nil {
		return cp, nil
	}
	os.RemoveAll(dir) // incomplete, or its dependencies are gone
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("%w: Maven (mvn) is not on PATH; install Maven 3 and Java 17+ (.ci/run does)", ErrBuild)
	}
	if _, err := javaBinary(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBuild, err)
	}
	// Test binaries of several packages start at once: one builds, the others wait for
	// it, so that two Maven runs do not download into a cold ~/.m2 at the same time.
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBuild, err)
	}
	defer unlock()
	if cp, err := classpath(dir); err == nil {
		return cp, nil // built while we waited
	}
	// Build in a directory of our own and rename it into place, so that a build cut
	// short leaves nothing that looks built.
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBuild, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, must(fs.Sub(oracleSources, "oracle"))); err != nil {
		return "", fmt.Errorf("%w: writing its sources to %s: %v", ErrBuild, tmp, err)
	}
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "package")
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: `mvn -q -B package` in %s failed (%v). It needs Maven Central "+
			"(https://repo.maven.apache.org) or a ~/.m2 that already holds kafka-streams 4.1.1 and the "+
			"plugins; the output ends:\n%s", ErrBuild, tmp, err, tail(out, 40))
	}
	if _, err := classpath(tmp); err != nil {
		return "", fmt.Errorf("%w: `mvn package` in %s succeeded but: %v", ErrBuild, tmp, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if cp, err := classpath(dir); err == nil {
			return cp, nil // another build won the race
		}
		return "", fmt.Errorf("%w: %v", ErrBuild, err)
	}
	return classpath(dir)
}

// classpath is the class path of the oracle built in dir, if the jar and every
// dependency it lists are there.
func classpath(dir string) (string, error) {
	jar := filepath.Join(dir, "target", "kstreams-oracle.jar")
	if _, err := os.Stat(jar); err != nil {
		return "", err
	}
	deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		return "", err
	}
	list := filepath.SplitList(strings.TrimSpace(string(deps)))
	if len(list) == 0 {
		return "", errors.New("target/classpath.txt lists no dependencies")
	}
	for _, p := range list {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("a dependency is missing: %w", err)
		}
	}
	return strings.Join(append([]string{jar}, list...), string(os.PathListSeparator)), nil
}

// lockFile takes the lock path by creating it, waiting while another process holds it.
// A lock older than 15 minutes is taken to be left by a process that died.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if st, err := os.Stat(path); err == nil && time.Since(st.ModTime()) > 15*time.Minute {
			os.Remove(path)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another build to release %s: %w", path, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sourcesVersion is a hash of the embedded sources: a changed topology rebuilds the jar.
func sourcesVersion() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(oracleSources, "oracle", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := oracleSources.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// javaBinary is $JAVA_HOME/bin/java if there is one, else java on PATH (as integration/kafka.sh).
func javaBinary() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); isExecutable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java is not on PATH (and no $JAVA_HOME/bin/java); install Java 17+ (.ci/run does)", ErrBuild)
	}
	return p, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// ansiEscape matches the colour codes Maven 3.8 writes even with -B.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func tail(b []byte, lines int) string {
	s := strings.TrimRight(ansiEscape.ReplaceAllString(string(b), ""), "\n")
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	also io.Writer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	if t.also != nil {
		t.also.Write(p)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
