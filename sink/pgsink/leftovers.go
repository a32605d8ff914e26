package pgsink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/sink"
)

// Prepared is a prepared transaction of an eddy application found on a server.
type Prepared struct {
	GID      string
	ID       sink.TxnID
	Database string
	Owner    string
	Prepared time.Time
}

// Leftovers lists the prepared transactions of application app (every eddy
// application's when app is "") in every database of the server, oldest first: what
// `eddy sinks pending` shows. A running application has at most one per task and sink
// node for a moment (between its pre-commit and post-commit); one that stays is left by
// an application that is down, or by a zombie whose task's next start will roll it
// back. A prepared transaction holds its row locks and keeps VACUUM from removing dead
// rows until it is finished: start the application (its tasks' recovery finishes them),
// or, if it is gone for good, finish them by hand (ROLLBACK PREPARED 'gid' in the
// database named).
func Leftovers(ctx context.Context, pool *pgxpool.Pool, app string) ([]Prepared, error) {
	prefix := sinktxn.IDPrefix
	if app != "" {
		if err := sinktxn.CheckName("application ID", app); err != nil {
			return nil, fmt.Errorf("pgsink: %w", err)
		}
		prefix += app + ":"
	}
	rows, err := pool.Query(ctx, `SELECT gid, database, owner, prepared FROM pg_prepared_xacts WHERE gid LIKE $1 ESCAPE '\' ORDER BY prepared`, likePrefix(prefix))
	if err != nil {
		return nil, dbErr("list the prepared transactions of "+prefix+"*", err)
	}
	var out []Prepared
	for rows.Next() {
		var p Prepared
		if err := rows.Scan(&p.GID, &p.Database, &p.Owner, &p.Prepared); err != nil {
			return nil, dbErr("list the prepared transactions of "+prefix+"*", err)
		}
		p.ID, _ = sink.ParseTxnID(p.GID) // a foreign GID keeps the zero ID; GID says it all
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list the prepared transactions of "+prefix+"*", err)
	}
	return out, nil
}

// Connect opens a pool for dsn and checks that the server answers, so that a refused
// login or a server down shows at once, naming the cause.
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgsink: the PostgreSQL DSN: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dbErr("connect to PostgreSQL", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dbErr(fmt.Sprintf("connect to PostgreSQL (database %q at %s:%d as %s)", cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.User), err)
	}
	return pool, nil
}
