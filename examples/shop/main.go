// Command shop runs the shop analytics of topology.go on an embedded broker: orders
// (keyed by order ID) re-keyed by customer, a running total per customer, orders
// enriched from the customers table, and a count of orders per minute.
//
// It starts the broker, creates the topics, starts the application, writes the sample
// input of sample.go step by step (waiting after each step until the application has
// processed it), then prints the totals as the application's store answers them
// (eddy.Query), the enriched orders and the per-minute counts read back from their
// topics with read_committed, and exits. Logs go to stderr.
//
//	go run ./examples/shop
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

const appID = "shop-analytics"

type options struct {
	partitions int
	verbose    bool
	timeout    time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.partitions, "partitions", 4, "partitions of every topic")
	flag.BoolVar(&o.verbose, "v", false, "log at info level (default: warnings only)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up when the input is not processed within this time")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	if o.partitions < 1 {
		return fmt.Errorf("-partitions %d: want at least 1", o.partitions)
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	broker, err := kafkatest.NewBroker()
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer broker.Close()
	c := broker.Cluster()
	// The orders and the customers must have as many partitions as each other: the
	// join reads the orders, re-keyed by customer, beside the customers.
	for _, topic := range []string{OrdersTopic, CustomersTopic, TotalsTopic, EnrichedTopic, PerMinuteTopic} {
		if err := c.CreateTopic(ctx, topic, int32(o.partitions), nil); err != nil {
			return err
		}
	}
	stateDir, err := os.MkdirTemp("", "eddy-shop-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)

	topo, err := Topology()
	if err != nil {
		return err
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: stateDir, Logger: logger})
	if err != nil {
		return err
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	// waitCtx ends when the time is up or when the application stops on its own.
	waitCtx, stopWaiting := context.WithCancelCause(ctx)
	defer stopWaiting(nil)
	waitCtx, cancel := context.WithTimeout(waitCtx, o.timeout)
	defer cancel()
	var runErr error
	appDone := make(chan struct{})
	go func() {
		defer close(appDone)
		runErr = app.Run(appCtx)
		if runErr != nil {
			stopWaiting(fmt.Errorf("the application stopped: %w", runErr))
		} else {
			stopWaiting(errors.New("the application stopped"))
		}
	}()
	defer func() { stopApp(); <-appDone }() // before the broker closes

	inputs := kafkatest.InputTopics(topo, appID)
	for i, step := range sampleInput {
		if err := produce(waitCtx, c, step); err != nil {
			return stopped(waitCtx, err)
		}
		if err := c.WaitProcessed(waitCtx, appID, inputs...); err != nil {
			return stopped(waitCtx, fmt.Errorf("input step %d: %w", i+1, err))
		}
	}
	totals, err := queryTotals(waitCtx, c, app)
	if err != nil {
		return stopped(waitCtx, err)
	}
	stopApp()
	<-appDone
	if runErr != nil {
		return runErr
	}
	return report(ctx, c, totals, stdout)
}

// stopped returns the reason the application stopped when it did, err otherwise.
func stopped(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return err
}

// produce writes one step of the sample input: orders with their times as timestamps.
func produce(ctx context.Context, c *kafkatest.Cluster, step sampleStep) error {
	var customers []processor.Record[string, Customer]
	for _, id := range sortedKeys(step.customers) {
		customers = append(customers, processor.Record[string, Customer]{Key: id, Value: step.customers[id]})
	}
	var orders []processor.Record[string, Order]
	for _, o := range step.orders {
		orders = append(orders, processor.Record[string, Order]{Key: o.id, Value: o.order, Timestamp: o.order.Time})
	}
	if err := kafkatest.ProduceTyped(ctx, c, CustomersTopic, serde.String(), serde.JSON[Customer](), customers...); err != nil {
		return err
	}
	return kafkatest.ProduceTyped(ctx, c, OrdersTopic, serde.String(), serde.JSON[Order](), orders...)
}

// queryTotals reads the totals from the application's store. A store is written just
// after the transaction that commits its output, so it may be a moment behind the
// totals topic: the store is read until it agrees with the topic.
func queryTotals(ctx context.Context, c *kafkatest.Cluster, app *eddy.App) (map[string]int64, error) {
	recs, err := kafkatest.ReadCommittedTyped(ctx, c, TotalsTopic, serde.String(), serde.Int64())
	if err != nil {
		return nil, err
	}
	want := map[string]int64{}
	for _, r := range recs {
		want[r.Key] = r.Value
	}
	q, err := eddy.Query[string, int64](app, TotalsStore)
	if err != nil {
		return nil, err
	}
	for {
		kvs, err := q.All()
		if err != nil && !errors.Is(err, eddy.ErrNotReady) {
			return nil, err
		}
		got := map[string]int64{}
		for _, kv := range kvs {
			got[kv.Key] = kv.Value
		}
		if err == nil && maps.Equal(got, want) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("store %s: %v, topic %s: %v: %w", TotalsStore, got, TotalsTopic, want, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// report prints the totals, the enriched orders by order ID and the per-minute counts.
func report(ctx context.Context, c *kafkatest.Cluster, totals map[string]int64, stdout io.Writer) error {
	enriched, err := kafkatest.ReadCommittedTyped(ctx, c, EnrichedTopic, serde.String(), serde.JSON[EnrichedOrder]())
	if err != nil {
		return err
	}
	slices.SortFunc(enriched, func(a, b kafkatest.Record[string, EnrichedOrder]) int {
		return cmp.Compare(a.Value.ID, b.Value.ID)
	})
	counts, err := kafkatest.ReadCommittedTyped(ctx, c, PerMinuteTopic, serde.String(), serde.Nullable(serde.Int64()))
	if err != nil {
		return err
	}
	perMinute := map[string]int64{}
	for _, r := range counts { // the last count of each minute
		if r.Value != nil {
			perMinute[r.Key] = *r.Value
		}
	}
	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "Totals per customer (store %s):\n", TotalsStore)
	for _, id := range sortedKeys(totals) {
		fmt.Fprintf(w, "%s\t%s\n", id, cents(totals[id]))
	}
	fmt.Fprintf(w, "\nEnriched orders (%s):\n", EnrichedTopic)
	for _, r := range enriched {
		e := r.Value
		if e.Name == "" {
			e.Name, e.City = "(unknown customer)", "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Customer, cents(e.Amount), e.Name, e.City)
	}
	fmt.Fprintf(w, "\nOrders per minute (%s):\n", PerMinuteTopic)
	for _, m := range sortedKeys(perMinute) {
		fmt.Fprintf(w, "%s\t%d\n", m, perMinute[m])
	}
	return w.Flush()
}

// cents formats an amount of cents as units with two decimals.
func cents(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s%d.%02d", sign, n/100, n%100)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
