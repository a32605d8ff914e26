package pgsink

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/sink"
)

// downProxy relays connections to the PostgreSQL at target until it is taken down:
// then it closes every relayed connection and refuses new ones (accepts and closes
// them) until it is brought up again. The database is real; only the way to it fails,
// as when the server crashes or the network between goes.
type downProxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func startDownProxy(t *testing.T, target string) *downProxy {
	t.Helper()
	p := &downProxy{target: target, conns: map[net.Conn]struct{}{}}
	p.l = serveProxy(t, &p.wg, p.relay, func() { p.setDown(true) })
	return p
}

// setDown takes the proxy down (closing what it relays) or brings it up.
func (p *downProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// track registers c, unless the proxy is down.
func (p *downProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *downProxy) relay(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	if !p.track(client, server) {
		return
	}
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, server)
		p.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(client, server)
		client.Close()
		close(done)
	}()
	_, _ = io.Copy(server, client)
	server.Close()
	<-done
}

// TestStrandedRollbackRetried: a unit of work's two-phase sink transaction was
// prepared, its Kafka transaction aborted, and its rollback failed because the database
// was unreachable (a fresh-clone CI run: a PostgreSQL crash during a prepare). The
// task's registry keeps it: the next Finish, which the worker runs before its next
// commit, rolls it back, so the replay's write of the same key is not held by its row
// lock; and Abandon, at the task's close, rolls back one still stranded. Kills the
// mutant that forgets a failed rollback (Registry.Rollback before the fix): the
// transaction stays prepared and the replay's write waits on its lock.
func TestStrandedRollbackRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	direct := pgtest.Pool(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startDownProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	addr := proxy.l.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = addr.IP.String(), uint16(addr.Port)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tbl := totalsTable(t, direct, "")
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := pgtest.Name(t, "app")
	reg := sinktxn.NewRegistry(app, "0_0", []sinktxn.Node{{Name: "out", Resolver: tg, Guarantee: sink.TwoPhase}})
	prefix := sink.TxnID{App: app, Task: "0_0", Node: "out"}.TaskPrefix()
	t.Cleanup(func() {
		ids, _ := tg.Pending(context.Background(), prefix)
		for _, id := range ids {
			_ = tg.Rollback(context.Background(), id)
		}
	})
	var nonce uint64
	reg.SetNonce(func() uint64 { return nonce })

	// strand prepares a unit of work that writes key a, then fails its rollback.
	strand := func(n uint64) {
		t.Helper()
		nonce = n
		open, err := reg.Open("out", func(id sinktxn.ID) (sinktxn.Open, error) { return tg.Begin(ctx, id) })
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, open.(sink.Txn[string, int64]), rec("a", int64(n), 0, int64(n)))
		if err := reg.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		proxy.setDown(true)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err = reg.Rollback(rctx)
		rcancel()
		proxy.setDown(false)
		if err == nil {
			t.Fatal("Rollback with the database unreachable returned nil")
		}
		if got := pendingCount(t, ctx, tg, prefix); got != 1 {
			t.Fatalf("after the failed rollback, %d transactions pending; want the prepared one", got)
		}
		if got := reg.Unfinished(); got != 1 {
			t.Fatalf("Unfinished() = %d after a failed rollback; want 1 (the stranded transaction)", got)
		}
	}

	strand(1)
	if err := reg.Finish(ctx); err != nil {
		t.Fatalf("Finish with the database back: %v", err)
	}
	if got := pendingCount(t, ctx, tg, prefix); got != 0 {
		t.Fatalf("after Finish, %d transactions pending; want the stranded one rolled back", got)
	}
	if got := reg.Unfinished(); got != 0 {
		t.Fatalf("Unfinished() = %d after Finish; want 0", got)
	}
	// The replay's write of the same key: no prepared transaction holds its lock.
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	if _, err := direct.Exec(wctx, fmt.Sprintf("INSERT INTO %s (k, n) VALUES ('a', 2)", tbl.Name)); err != nil {
		t.Fatalf("the replay's write of the same key: %v", err)
	}
	if _, err := direct.Exec(ctx, fmt.Sprintf("DELETE FROM %s", tbl.Name)); err != nil {
		t.Fatal(err)
	}

	strand(2)
	if err := reg.Abandon(ctx); err != nil {
		t.Fatalf("Abandon with the database back: %v", err)
	}
	if got := pendingCount(t, ctx, tg, prefix); got != 0 {
		t.Fatalf("after Abandon, %d transactions pending; want the stranded one rolled back", got)
	}
}

func pendingCount(t *testing.T, ctx context.Context, tg *Target[string, int64], prefix string) int {
	t.Helper()
	ids, err := tg.Pending(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}
