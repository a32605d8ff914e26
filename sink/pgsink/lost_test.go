package pgsink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/sink"
)

// cutProxy relays connections to the PostgreSQL at target, except that a connection
// whose client sends "PREPARE TRANSACTION" gets no answer: the proxy closes the
// client's side, forwards the statement a moment later and closes the server's side
// after another, so the server prepares the transaction after the client saw its
// connection die.
type cutProxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{target: target}
	p.l = serveProxy(t, &p.wg, p.relay, nil)
	return p
}

// serveProxy listens on a free local port and runs relay for every connection accepted,
// each on a goroutine counted in wg, until the test ends: then it closes the listener,
// calls stop (if any) and waits for every relay.
func serveProxy(t *testing.T, wg *sync.WaitGroup, relay func(net.Conn), stop func()) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		if stop != nil {
			stop()
		}
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); relay(c) }()
		}
	}()
	return l
}

func (p *cutProxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	done := make(chan struct{})
	go func() { // server → client; the server closing closes the client's side too
		_, _ = io.Copy(client, server)
		client.Close()
		close(done)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && bytes.Contains(buf[:n], []byte("PREPARE TRANSACTION")) {
			// The client's side dies first, and the PREPARE reaches the server only
			// later: a client that rolls back before the server process has exited
			// finds nothing to roll back, and the PREPARE then happens.
			client.Close()
			time.Sleep(300 * time.Millisecond)
			_, _ = server.Write(buf[:n])
			time.Sleep(300 * time.Millisecond) // the server carries the PREPARE out
			break
		}
		if n > 0 {
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	server.Close()
	client.Close()
	<-done
}

// TestLostPrepareAnswerRolledBack: the connection dies after PREPARE TRANSACTION was
// sent and carried out, before its answer: Prepare fails (retriable: eddy aborts and
// replays), and the transaction, prepared on the server, is rolled back at once rather
// than left to hold its row locks against the replay until the task's next start; the
// replay's write of the same key then goes through. Kills the mutant without the
// rollback after a lost answer (the transaction stays pending, the replay waits on its
// row lock) and the mutant that rolls back without waiting for the server process that
// ran the PREPARE to exit (the rollback finds nothing, the PREPARE comes after).
func TestLostPrepareAnswerRolledBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct := pgtest.Pool(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
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
	id := sink.TxnID{App: pgtest.Name(t, "app"), Task: "0_0", Node: "out", Nonce: 1}
	t.Cleanup(func() { _ = tg.Rollback(context.Background(), id) })
	txn, err := tg.Begin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, txn, rec("a", 1, 0, 1))
	err = txn.Prepare(ctx)
	if err == nil || !Retriable(err) {
		t.Fatalf("Prepare with its answer lost: %v (retriable %v), want a retriable error", err, Retriable(err))
	}
	if err := txn.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := tg.Pending(ctx, id.TaskPrefix()); err != nil || len(p) != 0 {
		t.Fatalf("Pending after the lost answer = %v, %v; want nothing left prepared", p, err)
	}
	// The replay writes the same key: no prepared transaction holds its lock.
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	if _, err := direct.Exec(rctx, fmt.Sprintf("INSERT INTO %s (k, n) VALUES ('a', 2)", tbl.Name)); err != nil {
		t.Fatalf("the replay's write of the same key: %v", err)
	}
}
