// Command orders-to-postgres delivers a shop's running totals per customer and its
// final order counts per minute into PostgreSQL, exactly once: both go through
// two-phase-commit targets (sink/pgsink) joined to eddy's Kafka transactions.
//
// It runs on an embedded broker and needs a PostgreSQL with max_prepared_transactions
// above 0; the repository's script starts one:
//
//	integration/postgres.sh start
//	go run ./examples/orders-to-postgres -postgres "$(integration/postgres.sh dsn)"
//
// It creates the tables customer_totals and orders_per_minute if missing (and empties
// them), writes a sample of orders, waits until the tables hold their results, prints
// them and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/sink/pgsink"
	"github.com/eddy-streams/eddy/window"
)

const appID = "orders-to-postgres"

func main() {
	dsn := flag.String("postgres", os.Getenv("EDDY_POSTGRES_DSN"), "PostgreSQL DSN (max_prepared_transactions > 0); default $EDDY_POSTGRES_DSN")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up when the results are not in the tables within this time")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, `orders-to-postgres: no PostgreSQL given: run "integration/postgres.sh start" and pass -postgres "$(integration/postgres.sh dsn)" (or set EDDY_POSTGRES_DSN)`)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dsn, *timeout, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orders-to-postgres:", err)
		os.Exit(1)
	}
}

// sample is the input: orders over three minutes, then one order two minutes later,
// whose time closes the first three minutes (end + grace passed).
func sample(base time.Time) map[string]Order {
	return map[string]Order{
		"o1": {Customer: "c1", Amount: 1250, Time: base.Add(5 * time.Second)},
		"o2": {Customer: "c2", Amount: 899, Time: base.Add(20 * time.Second)},
		"o3": {Customer: "c1", Amount: 4500, Time: base.Add(50 * time.Second)},
		"o4": {Customer: "c3", Amount: 1575, Time: base.Add(70 * time.Second)},
		"o5": {Customer: "c2", Amount: 101, Time: base.Add(100 * time.Second)},
		"o6": {Customer: "c3", Amount: 10000, Time: base.Add(150 * time.Second)},
		"o7": {Customer: "c1", Amount: 250, Time: base.Add(290 * time.Second)},
	}
}

func run(ctx context.Context, dsn string, timeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, err := pgsink.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, ddl := range []string{TotalsDDL, PerMinuteDDL, "TRUNCATE " + TotalsTable + ", " + PerMinuteTable} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("%s: %w", ddl, err)
		}
	}
	totals, err := pgsink.NewTwoPhase(ctx, pool, pgsink.Table[string, int64]{
		Name: TotalsTable, Columns: []string{"customer", "total_cents"}, Key: []string{"customer"},
		Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
	}, pgsink.Options{})
	if err != nil {
		return err
	}
	perMinute, err := pgsink.NewTwoPhase(ctx, pool, pgsink.Table[window.Windowed[string], int64]{
		Name: PerMinuteTable, Columns: []string{"minute", "orders"}, Key: []string{"minute"},
		Row: func(r sink.Record[window.Windowed[string], int64]) ([]any, error) {
			return []any{r.Key.Window.Start, r.Value}, nil
		},
	}, pgsink.Options{})
	if err != nil {
		return err
	}
	topo, err := Topology(totals, perMinute)
	if err != nil {
		return err
	}

	broker, err := kafkatest.NewBroker()
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer broker.Close()
	c := broker.Cluster()
	// One partition keeps the sample in time order: the per-minute count drops an order
	// that comes after its minute closed (end + Grace), and orders from several
	// partitions meet it in any order.
	if err := c.CreateTopic(ctx, OrdersTopic, 1, nil); err != nil {
		return err
	}
	stateDir, err := os.MkdirTemp("", "eddy-orders-to-postgres-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	app, err := eddy.New(topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: stateDir, Logger: logger})
	if err != nil {
		return err
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()

	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	orders := sample(base)
	var msgs []*sarama.ProducerMessage
	for _, id := range []string{"o1", "o2", "o3", "o4", "o5", "o6", "o7"} {
		v, err := serde.JSON[Order]().Serialize(OrdersTopic, orders[id])
		if err != nil {
			return err
		}
		msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder(id), Value: sarama.ByteEncoder(v), Timestamp: orders[id].Time})
	}
	if err := c.Produce(ctx, OrdersTopic, msgs...); err != nil {
		return err
	}
	// Every order in the totals, and three closed minutes (the fourth is still open).
	var all int64
	for _, o := range orders {
		all += o.Amount
	}
	for {
		var sum, minutes int64
		err := pool.QueryRow(ctx, "SELECT (SELECT coalesce(sum(total_cents), 0) FROM "+TotalsTable+"), (SELECT count(*) FROM "+PerMinuteTable+")").Scan(&sum, &minutes)
		if err == nil && sum == all && minutes == 3 {
			break
		}
		select {
		case err := <-appDone:
			return fmt.Errorf("the application stopped: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("the results did not reach PostgreSQL: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Stop cleanly: the last commit and its sink transactions complete first.
	stopApp()
	if err := <-appDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return report(ctx, pool, stdout)
}

func report(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
	fmt.Fprintln(out, "customer_totals:")
	rows, err := pool.Query(ctx, "SELECT customer, total_cents FROM "+TotalsTable+" ORDER BY customer")
	if err != nil {
		return err
	}
	for rows.Next() {
		var c string
		var t int64
		if err := rows.Scan(&c, &t); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\t%d.%02d\n", c, t/100, t%100)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\norders_per_minute (closed minutes):")
	rows, err = pool.Query(ctx, "SELECT minute, orders FROM "+PerMinuteTable+" ORDER BY minute")
	if err != nil {
		return err
	}
	for rows.Next() {
		var m time.Time
		var n int64
		if err := rows.Scan(&m, &n); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\t%d\n", m.UTC().Format("2006-01-02T15:04"), n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	left, err := pgsink.Leftovers(ctx, pool, appID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nprepared transactions left: %d\n", len(left))
	return nil
}
