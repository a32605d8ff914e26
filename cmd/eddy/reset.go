package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/internal/kread"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/securityflags"
	"github.com/eddy-streams/eddy/processor"
)

const resetUsage = `Usage: eddy reset --brokers HOST:PORT[,HOST:PORT...] --application-id ID [flags]

Makes an application start over, like Kafka's kafka-streams-application-reset:

  1. It refuses while the application's consumer group (named by the application ID)
     has members: stop every instance first.
  2. It resets the group's committed offsets on the application's input topics (the
     topics the group has committed offsets for, except its internal topics; or
     --input-topics) to the earliest offset, or with --to-datetime to the first offset
     of a record at or after that time (the end, where there is none).
  3. It deletes the application's internal topics, found by name: ID-<store>-changelog
     and ID-<name>-repartition. Output topics are left as they are.
  4. With --state-dir DIR it deletes the local state DIR/ID. Without it, delete
     <state dir>/ID on every host that ran an instance before starting the application
     again: a store left there would not match its new changelog.

--dry-run prints the plan and changes nothing.

Example:
  eddy reset --brokers localhost:9092 --application-id wordcount --dry-run
  EDDY_SASL_PASSWORD=... eddy reset --brokers kafka:9093 --application-id wordcount \
      --tls-ca-file ca.pem --sasl-mechanism SCRAM-SHA-512 --sasl-username wordcount

` + securityflags.Usage

// errGroupActive: the consumer group has members, so the application runs.
var errGroupActive = errors.New("the application is running")

// resetOptions are the flags of reset.
type resetOptions struct {
	brokers     []string
	appID       string
	toTime      time.Time // zero: the earliest offset
	inputTopics []string  // nil: the group's committed topics that are not internal
	dryRun      bool
	stateDir    string
	timeout     time.Duration
	logger      *slog.Logger
	security    eddy.Security
}

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eddy reset", resetUsage, stderr)
	brokers := fs.String("brokers", "", "comma-separated `host:port` bootstrap addresses (required)")
	appID := fs.String("application-id", "", "the application ID: its consumer group and internal topic prefix (required)")
	toDatetime := fs.String("to-datetime", "", "reset to the first offset at or after this `time` (RFC 3339, e.g. 2026-11-30T10:00:00Z) instead of the earliest")
	inputTopics := fs.String("input-topics", "", "comma-separated input `topics` to reset (default: the non-internal topics the group has committed offsets for)")
	dryRun := fs.Bool("dry-run", false, "print the plan and change nothing")
	stateDir := fs.String("state-dir", "", "also delete the local state `DIR`/<application-id> (the application's StateDir on this host)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	verbose := fs.Bool("v", false, "log progress to stderr")
	secFlags := securityflags.Register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	sec, err := secFlags.Security(os.Getenv)
	if err != nil {
		return usagef("reset: %v", err)
	}
	if len(pos) > 0 {
		return usagef("reset: unexpected arguments %q", pos)
	}
	o := resetOptions{appID: *appID, dryRun: *dryRun, stateDir: *stateDir, timeout: *timeout, logger: newLogger(stderr, *verbose), security: sec}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	if len(o.brokers) == 0 {
		return usagef("reset: --brokers is required")
	}
	if o.appID == "" {
		return usagef("reset: --application-id is required")
	}
	if *toDatetime != "" {
		t, err := time.Parse(time.RFC3339Nano, *toDatetime)
		if err != nil {
			return usagef("reset: --to-datetime %q: want RFC 3339 with a zone, like 2026-11-30T10:00:00Z or 2026-11-30T11:00:00+01:00", *toDatetime)
		}
		o.toTime = t
	}
	if *inputTopics != "" {
		for _, t := range strings.Split(*inputTopics, ",") {
			if t = strings.TrimSpace(t); t != "" {
				o.inputTopics = append(o.inputTopics, t)
			}
		}
	}
	if o.timeout <= 0 {
		return usagef("reset: --timeout %v must be positive", o.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return reset(ctx, o, stdout)
}

// offsetChange is the reset of one input partition.
type offsetChange struct {
	topic     string
	partition int32
	current   int64 // -1: none committed
	target    int64
	note      string
}

// resetPlan is what reset does.
type resetPlan struct {
	groupState  string
	offsets     []offsetChange
	deleteTopic []string
	skipped     []string // internal-looking topics left alone, with the reason
	notes       []string
	stateDir    string // <state-dir>/<app>, when --state-dir is given
	stateTasks  int    // task dirs in it
	stateExists bool
}

// reset runs the reset (or, with dryRun, prints its plan). ctx bounds the whole run.
func reset(ctx context.Context, o resetOptions, stdout io.Writer) error {
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	k, err := dialKafka(ctx, o.brokers, o.timeout, o.security)
	if err != nil {
		return err
	}
	defer k.close()

	var plan resetPlan
	// 1. The group must have no members; the local state dir no running instance.
	if plan.groupState, err = k.checkGroupIdle(o.appID); err != nil {
		return err
	}
	if o.stateDir != "" {
		if err := planStateDir(o, &plan); err != nil {
			return err
		}
	}
	// 2. Internal topics, by name.
	if err := k.planInternalTopics(o.appID, &plan); err != nil {
		return err
	}
	// 3. Input topics and their new offsets.
	if err := k.planOffsets(ctx, o, &plan); err != nil {
		return err
	}
	printPlan(stdout, o, &plan)
	if o.dryRun {
		fmt.Fprintln(stdout, "\nDry run: nothing was changed. Run again without --dry-run to apply this plan.")
		return nil
	}

	// Apply: offsets first (the group must still be idle: a member joining meanwhile
	// makes the commit fail), then the topics, then the local state.
	if err := k.commitOffsets(ctx, o.appID, plan.offsets); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nReset the offsets of %d partition(s).\n", len(plan.offsets))
	if err := k.deleteTopics(ctx, plan.deleteTopic); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Deleted %d internal topic(s).\n", len(plan.deleteTopic))
	if plan.stateDir != "" && plan.stateExists {
		if err := deleteStateDir(plan.stateDir); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Deleted the local state %s.\n", plan.stateDir)
	}
	fmt.Fprintln(stdout, "Done.")
	if plan.stateDir == "" {
		fmt.Fprintf(stdout, "Now delete the local state <state dir>/%s on every host that ran an instance (or run\n"+
			"eddy reset --state-dir <state dir> there), then start the application.\n", o.appID)
	}
	return nil
}

func printPlan(w io.Writer, o resetOptions, plan *resetPlan) {
	verb := "Resetting"
	if o.dryRun {
		verb = "Dry run: would reset"
	}
	fmt.Fprintf(w, "%s application %q on %s (consumer group state: %s, no members).\n", verb, o.appID, strings.Join(o.brokers, ","), plan.groupState)
	to := "the earliest offset"
	if !o.toTime.IsZero() {
		to = "the first offset at or after " + o.toTime.Format(time.RFC3339Nano)
	}
	if len(plan.offsets) == 0 {
		fmt.Fprintf(w, "\nInput offsets: none to reset (the group has no committed offsets on input topics).\n")
	} else {
		fmt.Fprintf(w, "\nInput offsets, reset to %s:\n", to)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TOPIC\tPARTITION\tCOMMITTED\tNEW")
		for _, c := range plan.offsets {
			cur := fmt.Sprint(c.current)
			if c.current < 0 {
				cur = "-"
			}
			note := ""
			if c.note != "" {
				note = "  (" + c.note + ")"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%d%s\n", c.topic, c.partition, cur, c.target, note)
		}
		_ = tw.Flush()
	}
	if len(plan.deleteTopic) == 0 {
		fmt.Fprintf(w, "\nInternal topics: none found (%s-*-changelog, %s-*-repartition).\n", o.appID, o.appID)
	} else {
		fmt.Fprintf(w, "\nInternal topics to delete:\n")
		for _, t := range plan.deleteTopic {
			fmt.Fprintf(w, "  %s\n", t)
		}
	}
	for _, s := range plan.skipped {
		fmt.Fprintf(w, "  (left alone: %s)\n", s)
	}
	for _, n := range plan.notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	switch {
	case plan.stateDir == "":
		fmt.Fprintf(w, "\nLocal state: not touched (no --state-dir). Delete <state dir>/%s on every host that ran an instance.\n", o.appID)
	case !plan.stateExists:
		fmt.Fprintf(w, "\nLocal state: %s does not exist; nothing to delete.\n", plan.stateDir)
	default:
		fmt.Fprintf(w, "\nLocal state to delete: %s (%d task dir(s)).\n", plan.stateDir, plan.stateTasks)
	}
}

// planStateDir checks <state-dir>/<app>: no running instance may hold its lock.
func planStateDir(o resetOptions, plan *resetPlan) error {
	dir := filepath.Join(o.stateDir, o.appID)
	plan.stateDir = dir
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset: --state-dir: %w", err)
	}
	plan.stateExists = true
	for _, e := range entries {
		if _, err := processor.ParseTaskID(e.Name()); err == nil && e.IsDir() {
			plan.stateTasks++
		}
	}
	release, err := lockAppDir(dir)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	release()
	return nil
}

// lockAppDir takes the lock a running instance holds on its application state dir,
// without waiting; the error says which process holds it.
func lockAppDir(dir string) (release func(), err error) {
	name := filepath.Join(dir, eddy.StateDirLockFile)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	locked, err := flock.TryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("state dir lock %s: %w", name, err)
	}
	if !locked {
		_ = f.Close()
		holder, _ := os.ReadFile(name)
		who := "a process"
		if h := strings.TrimSpace(string(holder)); h != "" {
			who = "an application instance (" + h + ")"
		}
		return nil, fmt.Errorf("%w: %s holds %s: stop it first", errGroupActive, who, name)
	}
	return func() {
		_ = flock.Unlock(f)
		_ = f.Close()
	}, nil
}

// deleteStateDir removes an application state dir while holding its lock.
func deleteStateDir(dir string) error {
	release, err := lockAppDir(dir)
	if err != nil {
		return fmt.Errorf("reset: delete the local state: %w", err)
	}
	defer release()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("reset: delete the local state %s: %w", dir, err)
	}
	return nil
}

// isInternalName reports whether topic is named like an internal topic of app:
// <app>-<store>-changelog or <app>-<name>-repartition.
func isInternalName(app, topic string) bool {
	rest, ok := strings.CutPrefix(topic, app+"-")
	if !ok {
		return false
	}
	for _, s := range []string{"-changelog", "-repartition"} {
		if mid, ok := strings.CutSuffix(rest, s); ok && mid != "" {
			return true
		}
	}
	return false
}

// planInternalTopics finds the internal topics of app. A topic that is named like one
// but belongs to another application whose ID starts with "<app>-" (app "wc" and
// "wc-test": "wc-test-counts-changelog") is left alone.
func (k *kafka) planInternalTopics(app string, plan *resetPlan) error {
	topics, err := k.admin.ListTopics()
	if err != nil {
		return fmt.Errorf("reset: list topics: %w", err)
	}
	var candidates []string
	for t := range topics {
		if isInternalName(app, t) {
			candidates = append(candidates, t)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	groups, err := k.admin.ListConsumerGroups()
	if err != nil {
		return fmt.Errorf("reset: list consumer groups (to tell this application's internal topics from those of applications named %q...): %w", app+"-", err)
	}
	var others []string
	for g := range groups {
		if g != app && strings.HasPrefix(g, app+"-") {
			others = append(others, g)
		}
	}
	slices.Sort(candidates)
	for _, t := range candidates {
		owner := ""
		for _, g := range others {
			if isInternalName(g, t) && len(g) > len(owner) {
				owner = g
			}
		}
		if owner != "" {
			plan.skipped = append(plan.skipped, fmt.Sprintf("%s belongs to application %q", t, owner))
			continue
		}
		plan.deleteTopic = append(plan.deleteTopic, t)
	}
	return nil
}

// planOffsets finds the input topics and the new offset of each of their partitions.
func (k *kafka) planOffsets(ctx context.Context, o resetOptions, plan *resetPlan) error {
	committed, err := k.committedOffsets(ctx, o.appID)
	if err != nil {
		return err
	}
	inputs := o.inputTopics
	if inputs == nil {
		internal := map[string]bool{}
		for _, t := range plan.deleteTopic {
			internal[t] = true
		}
		for t, ps := range committed {
			switch {
			case internal[t] || isInternalName(o.appID, t):
				continue
			case !k.topicExists(t):
				plan.notes = append(plan.notes, fmt.Sprintf("the group has offsets on %q, which no longer exists: left alone", t))
				continue
			}
			for _, off := range ps {
				if off >= 0 {
					inputs = append(inputs, t)
					break
				}
			}
		}
		slices.Sort(inputs)
	}
	for _, t := range inputs {
		if err := k.client.RefreshMetadata(t); err != nil {
			return fmt.Errorf("reset: input topic %q: %w", t, err)
		}
		ps, err := k.client.Partitions(t)
		if err != nil {
			return fmt.Errorf("reset: partitions of input topic %q: %w", t, err)
		}
		for _, p := range ps {
			c := offsetChange{topic: t, partition: p, current: -1}
			if off, ok := committed[t][p]; ok {
				c.current = off
			}
			if o.toTime.IsZero() {
				c.target, err = k.listOffset(ctx, t, p, sarama.OffsetOldest)
			} else {
				c.target, err = k.listOffset(ctx, t, p, o.toTime.UnixMilli())
				if err == nil && c.target < 0 {
					c.note = "no record at or after the time: the end"
					c.target, err = k.listOffset(ctx, t, p, sarama.OffsetNewest)
				}
			}
			if err != nil {
				return fmt.Errorf("reset: new offset of %s/%d: %w", t, p, err)
			}
			plan.offsets = append(plan.offsets, c)
		}
	}
	return nil
}

// kafka is the connection reset works with.
type kafka struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func dialKafka(ctx context.Context, brokers []string, timeout time.Duration, sec eddy.Security) (*kafka, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "eddy-reset"
	// The version eddy's runtime uses: a ceiling, sarama clamps each request to what
	// the broker supports.
	cfg.Version = sarama.V3_9_0_0
	cfg.Net.DialTimeout = min(10*time.Second, timeout)
	cfg.Admin.Timeout = min(30*time.Second, timeout)
	cfg.Admin.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	if err := sec.ApplyTo(cfg); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	type result struct {
		c   sarama.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := sarama.NewClient(brokers, cfg)
		done <- result{c, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				_ = r.c.Close()
			}
		}()
		return nil, fmt.Errorf("reset: connect to %v: %w", brokers, ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("reset: connect to %v: %w", brokers, r.err)
	}
	admin, err := sarama.NewClusterAdminFromClient(r.c)
	if err != nil {
		_ = r.c.Close()
		return nil, fmt.Errorf("reset: admin client for %v: %w", brokers, err)
	}
	return &kafka{client: r.c, admin: admin}, nil
}

func (k *kafka) close() { _ = k.admin.Close() } // closes the client too

func (k *kafka) topicExists(topic string) bool {
	_, err := k.client.Partitions(topic)
	return err == nil
}

// checkGroupIdle describes the group and fails, naming the members, unless it is
// Empty or Dead (or unknown).
func (k *kafka) checkGroupIdle(group string) (state string, err error) {
	descs, err := k.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return "", fmt.Errorf("reset: describe consumer group %q: %w", group, err)
	}
	if len(descs) != 1 {
		return "", fmt.Errorf("reset: describe consumer group %q: %d answers", group, len(descs))
	}
	d := descs[0]
	switch {
	case errors.Is(d.Err, sarama.ErrGroupIDNotFound):
		return "Dead", nil
	case !errors.Is(d.Err, sarama.ErrNoError):
		return "", fmt.Errorf("reset: describe consumer group %q: %w", group, d.Err)
	}
	if (d.State == "Empty" || d.State == "Dead") && len(d.Members) == 0 {
		return d.State, nil
	}
	members := make([]string, 0, len(d.Members))
	for id, m := range d.Members {
		members = append(members, fmt.Sprintf("%s (client %s, host %s)", id, m.ClientId, strings.TrimPrefix(m.ClientHost, "/")))
	}
	slices.Sort(members)
	return d.State, fmt.Errorf("reset: %w: its consumer group %q is %s with %d member(s): %s; "+
		"stop every instance and try again (an instance that was killed leaves the group after its session timeout)",
		errGroupActive, group, d.State, len(members), strings.Join(members, ", "))
}

// retriableGroupErr: the coordinator moved or is loading.
func retriableGroupErr(e sarama.KError) bool {
	switch e {
	case sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrOffsetsLoadInProgress,
		sarama.ErrUnstableOffsetCommit, sarama.ErrRequestTimedOut:
		return true
	}
	return false
}

// committedOffsets returns every committed offset of group, asking as a read_committed
// member does (RequireStable): offsets of a transaction being committed are waited for,
// so a late transaction cannot overwrite the reset.
func (k *kafka) committedOffsets(ctx context.Context, group string) (map[string]map[int32]int64, error) {
	for {
		out, retry, err := k.fetchOffsets(group)
		if err != nil {
			return nil, fmt.Errorf("reset: committed offsets of group %q: %w", group, err)
		}
		if retry == nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reset: committed offsets of group %q: %w (last answer: %w)", group, ctx.Err(), retry)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (k *kafka) fetchOffsets(group string) (out map[string]map[int32]int64, retry, err error) {
	coordinator, err := k.client.Coordinator(group)
	if err != nil {
		_ = k.client.RefreshCoordinator(group)
		return nil, err, nil
	}
	req := sarama.NewOffsetFetchRequest(k.client.Config().Version, group, nil) // nil: every topic
	req.RequireStable = true
	resp, err := coordinator.FetchOffset(req)
	if err != nil {
		_ = k.client.RefreshCoordinator(group)
		return nil, err, nil
	}
	if e := resp.GroupError(); !errors.Is(e, sarama.ErrNoError) {
		if errors.Is(e, sarama.ErrGroupIDNotFound) {
			return map[string]map[int32]int64{}, nil, nil
		}
		if retriableGroupErr(e) {
			_ = k.client.RefreshCoordinator(group)
			return nil, e, nil
		}
		return nil, nil, e
	}
	out = map[string]map[int32]int64{}
	for topic, blocks := range resp.Blocks {
		for p, b := range blocks {
			if !errors.Is(b.Err, sarama.ErrNoError) {
				if retriableGroupErr(b.Err) {
					return nil, b.Err, nil
				}
				return nil, nil, fmt.Errorf("%s/%d: %w", topic, p, b.Err)
			}
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = b.Offset
		}
	}
	return out, nil, nil
}

// listOffset runs ListOffsets (read_committed) for one partition: at is a time in unix
// milliseconds, sarama.OffsetOldest or sarama.OffsetNewest. For a time after the last
// record it returns -1.
func (k *kafka) listOffset(ctx context.Context, topic string, p int32, at int64) (int64, error) {
	return kread.ListOffsetAt(ctx, k.client, topic, p, at, sarama.ReadCommitted)
}

// commitOffsets commits the new offsets for the group as an admin does: generation -1
// and no member, which the coordinator accepts only while the group has no members.
func (k *kafka) commitOffsets(ctx context.Context, group string, changes []offsetChange) error {
	if len(changes) == 0 {
		return nil
	}
	b := backoff.Backoff{Max: time.Second}
	for {
		req := sarama.NewOffsetCommitRequest(k.client.Config(), group)
		for _, c := range changes {
			// Leader epoch -1: unknown, so no consumer checks the offset against it.
			req.AddBlockWithLeaderEpoch(c.topic, c.partition, c.target, -1, 0, "")
		}
		retry, err := k.sendCommit(group, req)
		if err != nil {
			return fmt.Errorf("reset: commit the new offsets of group %q: %w", group, err)
		}
		if retry == nil {
			return nil
		}
		if err := b.Wait(ctx); err != nil {
			return fmt.Errorf("reset: commit the new offsets of group %q: %w (last answer: %w)", group, err, retry)
		}
	}
}

func (k *kafka) sendCommit(group string, req *sarama.OffsetCommitRequest) (retry, err error) {
	coordinator, err := k.client.Coordinator(group)
	if err != nil {
		_ = k.client.RefreshCoordinator(group)
		return err, nil
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		_ = k.client.RefreshCoordinator(group)
		return err, nil
	}
	var errs []error
	for topic, ps := range resp.Errors {
		for p, e := range ps {
			switch {
			case errors.Is(e, sarama.ErrNoError):
			case retriableGroupErr(e):
				_ = k.client.RefreshCoordinator(group)
				return e, nil
			case errors.Is(e, sarama.ErrUnknownMemberId), errors.Is(e, sarama.ErrIllegalGeneration), errors.Is(e, sarama.ErrRebalanceInProgress):
				return nil, fmt.Errorf("%w: an instance joined the group during the reset (%s/%d: %w); stop it and run the reset again", errGroupActive, topic, p, e)
			default:
				errs = append(errs, fmt.Errorf("%s/%d: %w", topic, p, e))
			}
		}
	}
	return nil, errors.Join(errs...)
}

// deleteTopics deletes the topics and waits until the metadata no longer shows them.
func (k *kafka) deleteTopics(ctx context.Context, topics []string) error {
	for _, t := range topics {
		if err := k.admin.DeleteTopic(t); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return fmt.Errorf("reset: delete internal topic %q: %w", t, err)
		}
	}
	for len(topics) > 0 {
		all, err := k.admin.ListTopics()
		if err != nil {
			return fmt.Errorf("reset: list topics (waiting for the deletion): %w", err)
		}
		var left []string
		for _, t := range topics {
			if _, ok := all[t]; ok {
				left = append(left, t)
			}
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reset: internal topics %v still exist after their deletion: %w", left, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
