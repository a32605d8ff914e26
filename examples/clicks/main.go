// Command clicks runs the clicks analytics of topology.go on an embedded broker: page
// views per user in 1-minute tumbling windows, final results only, and user sessions.
//
// It starts the broker, creates the topics, starts the application, writes the sample
// input of sample.go step by step (waiting after each step until the application has
// processed it), then prints the final per-minute counts and sessions read back from
// their topics with read_committed, and exits. Logs go to stderr.
//
//	go run ./examples/clicks
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
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/window"
)

const appID = "clicks-analytics"

type options struct {
	partitions int
	verbose    bool
	timeout    time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of every topic")
	flag.BoolVar(&o.verbose, "v", false, "log at info level (default: warnings only)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up when the input is not processed within this time")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "clicks:", err)
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
	for _, topic := range []string{ViewsTopic, PerMinuteTopic, SessionsTopic} {
		if err := c.CreateTopic(ctx, topic, int32(o.partitions), nil); err != nil {
			return err
		}
	}
	stateDir, err := os.MkdirTemp("", "eddy-clicks-")
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
	stopApp()
	<-appDone
	if runErr != nil {
		return runErr
	}
	return report(ctx, c, stdout)
}

// stopped returns the reason the application stopped when it did, err otherwise.
func stopped(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return err
}

// produce writes one step of the sample input. The records' own timestamps are the
// time they are written; the application reads event time from the views.
func produce(ctx context.Context, c *kafkatest.Cluster, step []sampleView) error {
	recs := make([]processor.Record[string, PageView], 0, len(step))
	for _, v := range step {
		recs = append(recs, processor.Record[string, PageView]{Key: v.user, Value: PageView{Page: v.page, Time: sampleStart.Add(v.after)}})
	}
	return kafkatest.ProduceTyped(ctx, c, ViewsTopic, serde.String(), serde.JSON[PageView](), recs...)
}

// report prints the final counts per user and minute and the final sessions, each
// sorted by user and time.
func report(ctx context.Context, c *kafkatest.Cluster, stdout io.Writer) error {
	perMinute, err := kafkatest.ReadCommittedTyped(ctx, c, PerMinuteTopic, window.TimeWindowedSerde(serde.String(), Minute), serde.Nullable(serde.Int64()))
	if err != nil {
		return err
	}
	sessions, err := kafkatest.ReadCommittedTyped(ctx, c, SessionsTopic, window.SessionWindowedSerde(serde.String()), serde.Nullable(serde.Int64()))
	if err != nil {
		return err
	}
	byUserAndTime := func(a, b kafkatest.Record[window.Windowed[string], *int64]) int {
		return cmp.Or(cmp.Compare(a.Key.Key, b.Key.Key), a.Key.Window.Start.Compare(b.Key.Window.Start))
	}
	slices.SortFunc(perMinute, byUserAndTime)
	slices.SortFunc(sessions, byUserAndTime)
	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "Page views per user and minute, final (%s):\n", PerMinuteTopic)
	for _, r := range perMinute {
		fmt.Fprintf(w, "%s\t%s–%s\t%s\n", r.Key.Key, clock(r.Key.Window.Start), clock(r.Key.Window.End), count(r.Value))
	}
	fmt.Fprintf(w, "\nSessions per user, final (%s):\n", SessionsTopic)
	for _, r := range sessions {
		fmt.Fprintf(w, "%s\t%s–%s\t%s\n", r.Key.Key, clock(r.Key.Window.Start), clock(r.Key.Window.End), views(r.Value))
	}
	return w.Flush()
}

// views prints a session's count of views.
func views(n *int64) string {
	if n != nil && *n == 1 {
		return "1 view"
	}
	return count(n) + " views"
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// count prints a count; a final result is never a tombstone, "deleted" says if one was.
func count(n *int64) string {
	if n == nil {
		return "deleted"
	}
	return fmt.Sprint(*n)
}
