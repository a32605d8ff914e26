//go:build unix

package eos_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/eos"
	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestShortModePostgres is the CI run of the harness's PostgreSQL target: the
// aggregates and final results also written into PostgreSQL by two-phase commit, by
// idempotent upserts and by write-ahead pipes, with an instance killed itself at each
// step of the sink protocol (after a prepare, after the Kafka commit, before the
// commit-prepared, inside a recovery), an instance SIGKILLed and one SIGSTOPped past
// its session timeout, PostgreSQL crashed (pg_ctl stop -m immediate) and, where the
// real-Kafka tests run, the broker killed with kill -9 (a broker of the test's own;
// the embedded broker otherwise). Every table must equal its recomputation from the
// input, and no prepared transaction may be left. It needs PostgreSQL (it starts a
// server of its own with integration/postgres.sh): skipped without EDDY_TEST_POSTGRES,
// failed under CI.
func TestShortModePostgres(t *testing.T) {
	pgtest.DSN(t)
	ctx := testContext(t, 8*time.Minute)
	pg, dsn := ownPostgres(t, ctx)
	cfg := eos.Config{
		Seed: seedFor(t), Records: 10000, Keys: 200, Partitions: 4, Buckets: 16, Instances: 3,
		CommitInterval: 100 * time.Millisecond, Finals: true,
		Faults:     6,
		FaultKinds: append([]eos.FaultKind{eos.Kill, eos.Pause}, eos.SinkFaultKinds()...),
		Postgres:   &eos.PostgresConfig{DSN: dsn, Control: pg, Crashes: 1},
	}
	real := len(kafkatest.BrokersFromEnv()) > 0
	if real {
		broker, addr := ownBroker(t, ctx)
		c := kafkatest.Connect(t, "own-kafka", []string{addr})
		cfg.Brokers, cfg.Prefix, cfg.Broker, cfg.BrokerRestarts = c.Addrs(), c.Unique("eospg"), broker, 1
	} else {
		b, err := kafkatest.NewBroker()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		c := kafkatest.Connect(t, "embedded", b.Addrs())
		cfg.Brokers, cfg.Prefix = c.Addrs(), c.Unique("eospg")
	}
	res := run(t, ctx, cfg)
	t.Logf("%s", res.PostgresSummary())
	if !res.OK() {
		t.Errorf("%s", res.Summary())
	}
	for _, s := range sinktxn.Steps() {
		if res.SinkKills[string(s)] == 0 {
			t.Errorf("no instance was killed at sink step %s: %s", s, res.PostgresSummary())
		}
	}
	if res.PostgresCrashes != 1 || res.Kills < 5 || res.Pauses < 1 || (real && res.BrokerRestarts != 1) {
		t.Errorf("faults: %s; want 1 PostgreSQL crash, at least 5 kills and 1 pause (and 1 broker restart on real Kafka)", res.Summary())
	}
	if res.Report.PGRows == 0 || res.Report.FinalWindows == 0 {
		t.Errorf("%s; %s: want rows and final results checked", res.PostgresSummary(), res.Report.WindowSummary())
	}
}

// ownPostgres starts a PostgreSQL of the test's own with integration/postgres.sh (the
// harness crashes it), on a free port, purged when the test ends.
func ownPostgres(t *testing.T, ctx context.Context) (eos.ScriptPostgres, string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "postgres.sh"))
	if err != nil {
		t.Fatal(err)
	}
	s := eos.ScriptPostgres{Script: script, Env: []string{
		"EDDY_POSTGRES_HOME=" + t.TempDir(),
		fmt.Sprintf("EDDY_POSTGRES_PORT=%d", freePorts(t, 1)[0]),
	}}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Purge(sctx); err != nil {
			t.Errorf("purging the test's PostgreSQL: %v", err)
		}
	})
	dsn, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, dsn
}
