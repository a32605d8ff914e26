// Package pgtest gives tests the real PostgreSQL that test.sh starts
// (integration/postgres.sh): its DSN from EDDY_TEST_POSTGRES, a pool, unique names.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Env names the variable holding the DSN of the test server.
const Env = "EDDY_TEST_POSTGRES"

// LoginRole and LoginPassword: the role integration/postgres.sh creates with a
// password (every other loopback login is trusted), for refused-login tests.
const (
	LoginRole     = "eddy_login"
	LoginPassword = "eddy-login"
)

// DSN returns the test server's DSN. Without one the test fails under CI (test.sh
// always starts the server there) and is skipped elsewhere.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set in CI: test.sh starts PostgreSQL (integration/postgres.sh) and exports it", Env)
		}
		tb.Skipf("%s is not set: no PostgreSQL to run against (integration/postgres.sh start, then export %s=<the DSN it prints>)", Env, Env)
	}
	return dsn
}

// Pool opens a pool on the test server, closed when the test ends.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, DSN(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		tb.Fatalf("the test PostgreSQL at %s does not answer: %v", os.Getenv(Env), err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

var calls atomic.Uint32

// Name returns a name unique to this test run (lowercase, for tables and IDs):
// prefix, the test's name and a counter and a time stamp.
func Name(tb testing.TB, prefix string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	if len(n) > 24 {
		n = n[len(n)-24:]
	}
	return fmt.Sprintf("%s_%s_%d_%d", prefix, n, time.Now().UnixNano()%1e9, calls.Add(1))
}

// Exec runs SQL on pool and fails the test on an error.
func Exec(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// Server is a PostgreSQL of the test's own, started by integration/postgres.sh on a
// free port with its own data dir (a few seconds: initdb), for tests that crash or
// reconfigure the server and must not disturb the shared one.
type Server struct {
	DSN    string
	script string
	env    []string
}

// Start starts a server of the test's own, with the extra environment env (e.g.
// EDDY_POSTGRES_MAX_PREPARED=0); it is purged when the test ends. It needs the
// PostgreSQL binaries (skipped without them, failed under CI).
func Start(tb testing.TB, env ...string) *Server {
	tb.Helper()
	DSN(tb) // no test server, no private one either: skip or fail the same way
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "integration", "postgres.sh")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{script: script, env: append([]string{
		"EDDY_POSTGRES_HOME=" + tb.TempDir(),
		fmt.Sprintf("EDDY_POSTGRES_PORT=%d", port),
	}, env...)}
	tb.Cleanup(func() {
		if out, err := s.run("purge"); err != nil {
			tb.Logf("%s purge: %v\n%s", script, err, out)
		}
	})
	out, err := s.run("start")
	if err != nil {
		tb.Fatalf("%s start: %v\n%s", script, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.DSN = lines[len(lines)-1]
	return s
}

// Crash stops the server at once (pg_ctl stop -m immediate) and starts it again on
// the same data dir.
func (s *Server) Crash(tb testing.TB) {
	tb.Helper()
	if out, err := s.run("crash"); err != nil {
		tb.Fatalf("%s crash: %v\n%s", s.script, err, out)
	}
}

// Stop stops the server (the data dir is kept until the test ends).
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if out, err := s.run("stop"); err != nil {
		tb.Fatalf("%s stop: %v\n%s", s.script, err, out)
	}
}

func (s *Server) run(cmd string) (string, error) {
	c := exec.Command(s.script, cmd)
	c.Env = append(os.Environ(), s.env...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}
