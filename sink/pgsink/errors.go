package pgsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Error is a failure of a pgsink operation: what was done (Op), and whether a retry may
// get past it (Retriable: the database down or restarting, a connection lost, too many
// connections, a serialization failure or deadlock). A non-retriable error (a refused
// login, a missing table, a constraint violation) will fail again as it is.
type Error struct {
	Op        string
	Retriable bool
	Err       error
}

func (e *Error) Error() string {
	hint := ""
	if e.Retriable {
		hint = " (retriable: the database is unreachable or busy; retry once it is back)"
	}
	return fmt.Sprintf("pgsink: %s: %v%s", e.Op, e.Err, hint)
}

func (e *Error) Unwrap() error { return e.Err }

// Retriable reports whether err (or an error it wraps) is one a retry may get past:
// the database down, restarting or unreachable, a connection lost, too many
// connections, a serialization failure or a deadlock. Constraint violations, missing
// tables and refused logins are not.
func Retriable(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Retriable
	}
	return retriable(err)
}

func retriable(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case strings.HasPrefix(pg.Code, "08"), // connection exception
			pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03", // admin/crash shutdown, cannot connect now
			pg.Code == "53300",                     // too many connections
			pg.Code == "40001", pg.Code == "40P01", // serialization failure, deadlock
			pg.Code == "55000": // object in use: a prepared transaction being finished by another session
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) {
		// The caller gave up: not the database's failure.
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// An operation's deadline: the database slow or unreachable.
		return true
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ne), errors.As(err, &ce), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	}
	// pgx reports a connection that died mid-statement as "conn closed" or
	// "unexpected EOF" without a typed error.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "conn busy") || strings.Contains(msg, "unexpected EOF")
}

// dbErr wraps a database error with what was being done, saying what to do for the
// failures a user fixes outside the program (a refused login).
func dbErr(op string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (pg.Code == "28P01" || pg.Code == "28000") {
		return &Error{Op: op, Err: fmt.Errorf("PostgreSQL refused the login (%w): check the user and password of the DSN, and pg_hba.conf on the server", err)}
	}
	return &Error{Op: op, Retriable: retriable(err), Err: err}
}

func dbName(pool *pgxpool.Pool) string {
	cc := pool.Config().ConnConfig
	return fmt.Sprintf("%q at %s:%d", cc.Database, cc.Host, cc.Port)
}

// violation reports whether err is a data error that one record causes: an integrity
// constraint violation (class 23: not null, foreign key, unique, check, exclusion) or a
// value the column's type refuses (class 22).
func violation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "23") || strings.HasPrefix(pg.Code, "22"))
}

// culprit finds the record of a failed batch that the database refuses, for the error
// message: it writes the batch's rows one by one, each behind a savepoint, in a
// transaction of its own that it rolls back (nothing is written). The failed
// transaction cannot tell: a COPY or a multi-row statement reports the constraint, not
// the row. A row that fails only beside rows of earlier batches of the same transaction
// is not found; the error then names the batch's first and last record.
func (tb *table[K, V]) culprit(ctx context.Context, pool *pgxpool.Pool, rows []row) (source, error, bool) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return source{}, nil, false
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, r := range rows {
		if _, err := tx.Exec(ctx, "SAVEPOINT eddy_probe"); err != nil {
			return source{}, nil, false
		}
		werr := tb.write(ctx, tx, []row{r})
		if werr != nil {
			if violation(werr) {
				return r.src, werr, true
			}
			return source{}, nil, false
		}
		if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT eddy_probe"); err != nil {
			return source{}, nil, false
		}
	}
	return source{}, nil, false
}

// writeErr is the error of a batch that failed: a data error names the record, others
// say whether a retry may help.
func (tb *table[K, V]) writeErr(ctx context.Context, pool *pgxpool.Pool, rows []row, err error) error {
	op := fmt.Sprintf("write %d rows into table %s", len(rows), tb.Name)
	if !violation(err) {
		return dbErr(op, err)
	}
	if src, rerr, ok := tb.culprit(ctx, pool, rows); ok {
		return &Error{Op: op, Err: fmt.Errorf("the record of %s is refused: %w", src, rerr)}
	}
	return &Error{Op: op, Err: fmt.Errorf("a record between %s and %s is refused: %w", rows[0].src, rows[len(rows)-1].src, err)}
}
