// Package restore brings a task's stores up to date from their changelog topics: the
// runtime's Restorer reads a changelog partition from the store's checkpoint up to its
// last stable offset (never the high-water mark: transaction markers occupy offsets, so a
// reader waiting for the high-water mark can wait forever), taken once every transaction
// open on the partition has ended (kread.StableOffsets), reading with read_committed
// and applying the fetched records in large sorted backend writes, each with the
// checkpoint it reaches; a store restored from empty is built in key order instead and
// gets its checkpoint at the end (kvstore.BulkRestorer). What a restore did reaches users
// as a changelog.Result (Config.OnRestore); its failures wrap changelog.ErrRestore.
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
)

// Progress describes a restore under way.
type Progress struct {
	Store     string
	Topic     string
	Partition int32
	// Done and Total count offsets (records and transaction markers) from the start of
	// this restore to the end offset.
	Done, Total int64
	// End is the changelog offset the restore reads up to (its last stable offset when
	// the restore began, or Restorer.Until).
	End int64
	// Rate is the records applied per second so far.
	Rate     float64
	Finished bool
}

// Restorer reads changelog partitions into stores. It is safe for concurrent use by
// several tasks.
type Restorer struct {
	Client sarama.Client
	Logger *slog.Logger
	// OnProgress, if set, is called after each applied batch and at the end.
	OnProgress func(Progress)
	// ProgressEvery is the interval between progress log lines; default 5 s.
	ProgressEvery time.Duration
	// MarkersWait bounds the wait for the commit markers of the store's own last
	// transaction when its checkpoint is above the last stable offset; default 15 s.
	MarkersWait time.Duration
	// StableWait bounds the wait, before a restore takes the changelog's last stable
	// offset for its end, for the transactions open on the changelog partition to end
	// (kread.StableOffsets): a previous owner's transaction left open holds the last
	// stable offset below records a later owner committed. Default
	// kread.StableBound(10 s), for producers with eddy's default transaction timeout.
	// Past it the restore fails with an error wrapping kread.ErrTransactionOpen, and
	// leaves the store as it is: retrying later is safe.
	StableWait time.Duration
	// Tail takes the last stable offset for the end as it is, without waiting for the
	// transactions open on the partition to end (StableWait): for a reader that reads
	// again soon from where it stopped (a standby replica), which reads what lies behind
	// an open transaction at a later round, once the transaction has ended. Never for a
	// restore after which a task processes: see endOffsets.
	Tail bool
	// FetchMaxBytes bounds one fetch; default 2 MiB. Larger fetches read no faster
	// (BENCHMARKS.md) but every restoring task holds one in memory, and its records
	// until they are written.
	FetchMaxBytes int32
	// FromEmpty bounds the memory of a restore from empty (no checkpoint, or wiped): it
	// gathers each key's last value, spilling sorted runs to files in the task's state
	// dir above FromEmpty.MaxBytes, and loads the store in key order at the end
	// (kvstore.BulkRestorer). Zero values are kvstore's defaults.
	FromEmpty kvstore.BulkRestorerOptions
	// Until, when HasUntil, ends the restore at that offset instead of the changelog's
	// end: a store whose changelog is its task's source topic is restored up to the
	// task's committed input offset, and the task processes the rest. A checkpoint above
	// it (an at-least-once task whose offset commit was lost) leaves the store as it is.
	Until    int64
	HasUntil bool
	// Convert, when set, makes each record into the store's entry (a source topic's
	// records are not in the store's layout); skip drops the record, as does an error
	// (a record the task could not read either).
	Convert func(rec kread.Record) (key, value []byte, skip bool, err error)
	// NoBulk restores from empty like a tail, in batched random-order writes that keep
	// their progress when interrupted, at about a third of the speed (BENCHMARKS.md).
	// It also keeps a long tail in batched writes (see BulkTailFactor).
	NoBulk bool
	// BulkTailFactor: a tail of more than BulkTailFactor offsets per key of the store
	// (and at least minBulkTail) is merged into the store in a new file, in key order
	// (kvstore.NewBulkTailRestorer), instead of in batched random-order writes; such a
	// restore keeps no progress when interrupted (the store stays at its checkpoint).
	// Default 4; negative: never.
	BulkTailFactor int
	// BulkTailMin is the shortest tail merged in a new file; default 50,000 offsets:
	// below it the batched writes cost less than copying even a small store.
	BulkTailMin int64
}

// defaultMarkersWait bounds the wait for pending commit markers: markers are written
// within milliseconds of EndTxn; a transaction of another producer holding the last
// stable offset back ends within its transaction timeout (eddy's default is 10 s).
const defaultMarkersWait = 15 * time.Second

// awaitMarkers handles a checkpoint cp above the last stable offset end. A checkpoint
// above the high-water mark cannot come from this changelog: it was recreated, and the
// caller wipes the store (end is returned as it is). Otherwise the store's last commit
// is in the log but its markers are pending (on real Kafka, EndTxn answers before the
// markers are written): wait, with backoff, until the last stable offset reaches cp.
// Treating it as "recreated" would wipe the store and restore only up to the stale end
// offset, losing the last commit for good.
func (r *Restorer) awaitMarkers(ctx context.Context, logger *slog.Logger, topic string, partition int32, cp, end int64) (int64, error) {
	hwm, err := kread.HighWaterMark(r.Client, topic, partition)
	if err != nil {
		return end, err
	}
	if cp > hwm {
		return end, nil
	}
	wait := r.MarkersWait
	if wait <= 0 {
		wait = defaultMarkersWait
	}
	deadline := time.Now().Add(wait)
	b := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 500 * time.Millisecond}
	for end < cp {
		if time.Now().After(deadline) {
			return end, fmt.Errorf("%w: checkpoint %d, last stable offset %d, high-water mark %d of %s/%d after %v", changelog.ErrMarkersPending, cp, end, hwm, topic, partition, wait)
		}
		if err := b.Wait(ctx); err != nil {
			return end, err
		}
		if end, err = kread.ListOffset(r.Client, topic, partition, sarama.OffsetNewest); err != nil {
			return end, err
		}
	}
	logger.Debug("waited for the commit markers of the store's last transaction", "checkpoint", cp, "end", end)
	return end, nil
}

// start is where a restore starts.
type start int

const (
	// atCheckpoint: the store holds a prefix of the changelog; read the tail.
	atCheckpoint start = iota
	// fromEmpty: no usable checkpoint (none, or below the log start: truncated); wipe
	// the store and read the whole changelog.
	fromEmpty
	// awaitMarkers: the checkpoint is above the last stable offset. Either the store's
	// own last commit has its markers pending (wait for them), or the changelog was
	// recreated (the high-water mark tells: see afterMarkers).
	awaitMarkers
)

// decideStart is the restore decision, with no I/O, from the store's checkpoint (if
// any) and the changelog partition's log start and last stable offsets.
func decideStart(checkpoint int64, hasCheckpoint bool, logStart, lastStable int64) start {
	switch {
	case !hasCheckpoint || checkpoint < logStart:
		return fromEmpty
	case checkpoint > lastStable:
		return awaitMarkers
	}
	return atCheckpoint
}

// afterMarkers decides after the wait for markers: a checkpoint still above the last
// stable offset was above the high-water mark, so it cannot come from this changelog.
func afterMarkers(checkpoint, lastStable int64) start {
	if checkpoint > lastStable {
		return fromEmpty
	}
	return atCheckpoint
}

// Restore brings store (kept in backend) up to the last stable offset of partition of
// its changelog topic, starting at the store's checkpoint. With no checkpoint, one below
// the log start, one above the high-water mark or one recorded for another topic ID
// (the topic was recreated; topicid.go), the store is wiped and read from the start, in key order when the backend supports it (see
// Restorer.FromEmpty; such a restore keeps no progress when interrupted: the store stays
// empty with no checkpoint). A checkpoint between the last stable offset and the
// high-water mark means markers pending: Restore waits for them (MarkersWait) and fails
// with changelog.ErrMarkersPending, leaving the store as it is, if they do not come. Fetched batches
// are gathered into large sorted backend writes (kvstore.Restorer), each carrying the
// checkpoint of its last batch, so a restore stopped by ctx (a rebalance) keeps its
// progress and resumes there.
func (r *Restorer) Restore(ctx context.Context, backend kvstore.Backend, store, topic string, partition int32) (changelog.Result, error) {
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	run := &restoreRun{
		r: r, backend: backend, store: store, topic: topic, partition: partition,
		logger: logger.With("store", store, "changelog", topic, "partition", partition),
		began:  time.Now(), res: changelog.Result{Store: store},
	}
	err := run.restore(ctx)
	run.res.Duration = time.Since(run.began)
	return run.res, err
}

// restoreRun is one restore under way.
type restoreRun struct {
	r         *Restorer
	backend   kvstore.Backend
	store     string
	topic     string
	partition int32
	logger    *slog.Logger
	began     time.Time
	res       changelog.Result
	from, end int64
	// topicID is the changelog's current topic ID (zero: the broker gives none).
	topicID sarama.Uuid
	// Fetched batches go to sr, which gathers them into large sorted writes with their
	// checkpoints, or, for a store restored from empty, to bulk, which builds the store
	// in key order (kvstore.BulkRestorer).
	sr   *kvstore.Restorer
	bulk *kvstore.BulkRestorer
}

func (run *restoreRun) fail(what string, err error) error {
	if what == "" {
		return fmt.Errorf("%w: store %q: %w", changelog.ErrRestore, run.store, err)
	}
	return fmt.Errorf("%w: store %q: %s: %w", changelog.ErrRestore, run.store, what, err)
}

func (run *restoreRun) restore(ctx context.Context) error {
	if err := run.plan(ctx); err != nil {
		return err
	}
	if err := run.recordTopicID(); err != nil {
		return err
	}
	run.res.From, run.res.To = run.from, run.end
	if run.from >= run.end {
		run.r.report(Progress{Store: run.store, Topic: run.topic, Partition: run.partition, End: run.end, Finished: true})
		return nil
	}
	run.logger.Info("restoring store", "from", run.from, "to", run.end, "offsets", run.end-run.from, "wiped", run.res.Wiped)
	run.sr = kvstore.NewRestorer(run.backend, run.store, kvstore.RestorerOptions{})
	if run.res.Wiped {
		if err := run.startBulk(); err != nil {
			return err
		}
	} else if err := run.startBulkTail(); err != nil {
		return err
	}
	if err := run.read(ctx); err != nil {
		return err
	}
	return run.finish(ctx)
}

// endOffsets returns the changelog partition's log start and the end of the restore:
// the last stable offset once every transaction open on the partition has ended
// (kread.StableOffsets). The last stable offset alone is not the end while a
// transaction is open: a previous owner that stalled or died in a commit (another
// transactional ID, which the next owner's producer does not fence) holds it at its
// first record, and a later owner's commits lie above it; restored only up to it, the
// store would miss them while the task reads its input from the later owner's committed
// offsets (issue 22). A store restored from its source topic up to the task's committed
// input offset (Until) needs no wait when that offset is at or below the last stable
// offset: the task consumed up to it with read_committed, so every record below it is
// committed and decided, and a user's producer keeping transactions open on the source
// topic must not hold the restore up.
func (run *restoreRun) endOffsets(ctx context.Context) (start, end int64, err error) {
	if run.r.Tail {
		return kread.EndOffsets(run.r.Client, run.topic, run.partition)
	}
	if run.r.HasUntil {
		start, end, err = kread.EndOffsets(run.r.Client, run.topic, run.partition)
		if err != nil || run.r.Until <= end {
			return start, end, err
		}
	}
	wait := run.r.StableWait
	if wait <= 0 {
		wait = kread.StableBound(defaultTransactionTimeout)
	}
	start, end, err = kread.StableOffsets(ctx, run.r.Client, run.topic, run.partition, wait, func(lastStable, highWater int64) {
		run.logger.Info("a transaction is open on the changelog (a previous owner stalled or died in a commit); waiting for it to end before restoring, since records committed behind it lie above the last stable offset",
			"last_stable_offset", lastStable, "high_water_mark", highWater, "bound", wait)
	})
	if errors.Is(err, kread.ErrTransactionOpen) {
		err = fmt.Errorf("%w: %w", changelog.ErrMarkersPending, err)
	}
	return start, end, err
}

// defaultTransactionTimeout is eddy's default Config.TransactionTimeout, which bounds
// the transactions that write a changelog.
const defaultTransactionTimeout = 10 * time.Second

// plan decides where the restore starts (decideStart), waiting for pending markers and
// wiping the store where the decision says so.
func (run *restoreRun) plan(ctx context.Context) error {
	logStart, end, err := run.endOffsets(ctx)
	if err != nil {
		return run.fail("", err)
	}
	cp, ok, err := run.checkpoint()
	if err != nil {
		return err
	}
	if run.r.HasUntil && run.r.Until < end {
		end = run.r.Until
		if ok && cp > end && cp >= logStart {
			run.logger.Warn("store is ahead of the committed input offset; keeping it", "checkpoint", cp, "committed", end)
			run.from, run.end = cp, cp
			return nil
		}
	}
	decision := decideStart(cp, ok, logStart, end)
	if decision == awaitMarkers {
		if end, err = run.r.awaitMarkers(ctx, run.logger, run.topic, run.partition, cp, end); err != nil {
			return run.fail("", err)
		}
		decision = afterMarkers(cp, end)
	}
	run.from, run.end = cp, end
	if decision == fromEmpty {
		if ok {
			run.logger.Warn("checkpoint outside the changelog (recreated or truncated); wiping the store and restoring it all", "checkpoint", cp, "log_start", logStart, "end", end)
		}
		if err := run.backend.Wipe(run.store); err != nil {
			return run.fail("wipe", err)
		}
		run.res.Wiped, run.from = true, logStart
	}
	return nil
}

// startBulk makes a store restored from empty go through a BulkRestorer, where the
// backend supports it.
func (run *restoreRun) startBulk() error {
	if run.bulk != nil || run.r.NoBulk || !kvstore.CanBulkRestore(run.backend) {
		return nil
	}
	opts := run.r.FromEmpty
	opts.Records = run.end - run.from
	var err error
	if run.bulk, err = kvstore.NewBulkRestorer(run.backend, run.store, opts); err != nil {
		return run.fail("", err)
	}
	return nil
}

// startBulkTail makes a tail far larger than the store go through a tail BulkRestorer
// (see Restorer.BulkTailFactor), where the backend supports it.
func (run *restoreRun) startBulkTail() error {
	factor := run.r.BulkTailFactor
	if factor == 0 {
		factor = 4
	}
	least := run.r.BulkTailMin
	if least <= 0 {
		least = 50_000
	}
	tail := run.end - run.from
	if factor < 0 || run.r.NoBulk || tail < least {
		return nil
	}
	keys, ok, err := kvstore.BulkTailKeys(run.backend, run.store)
	if err != nil {
		return run.fail("count keys", err)
	}
	if !ok || tail <= int64(factor)*keys {
		return nil
	}
	opts := run.r.FromEmpty
	opts.Records = tail
	if run.bulk, err = kvstore.NewBulkTailRestorer(run.backend, run.store, opts); err != nil {
		return run.fail("", err)
	}
	run.logger.Info("the tail is far larger than the store: merging it in key order", "keys", keys, "tail_offsets", tail)
	return nil
}

// read fetches the changelog from run.from to run.end into the store.
func (run *restoreRun) read(ctx context.Context) error {
	every, maxBytes := run.r.ProgressEvery, run.r.FetchMaxBytes
	if every <= 0 {
		every = 5 * time.Second
	}
	if maxBytes <= 0 {
		maxBytes = 2 << 20
	}
	next, lastLog, empty := run.from, time.Now(), 0
	ahead := &fetchAhead{client: run.r.Client, topic: run.topic, partition: run.partition, maxBytes: maxBytes}
	defer ahead.stop()
	for next < run.end {
		if err := ctx.Err(); err != nil {
			return run.interrupted(next, err)
		}
		batch, newNext, err := ahead.fetch(next, run.end)
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			// The log start moved past us (truncated): what we have is not a prefix of
			// the log any more.
			run.logger.Warn("changelog truncated under the restore; starting over", "at", next)
			ahead.stop()
			if next, err = run.startOver(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return run.fail(fmt.Sprintf("fetch %s/%d at %d", run.topic, run.partition, next), err)
		}
		if newNext == next {
			if empty++; empty > 20 {
				return run.fail("", fmt.Errorf("no progress at offset %d of %s/%d below end offset %d", next, run.topic, run.partition, run.end))
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		empty = 0
		if err := run.apply(batch, newNext); err != nil {
			return err
		}
		next = newNext
		rate := float64(run.res.Records) / time.Since(run.began).Seconds()
		run.r.report(Progress{Store: run.store, Topic: run.topic, Partition: run.partition, Done: next - run.from, Total: run.end - run.from, End: run.end, Rate: rate})
		if time.Since(lastLog) >= every {
			lastLog = time.Now()
			run.logger.Info("restoring store", "done", next-run.from, "remaining", run.end-next, "records_per_sec", int64(rate))
		}
	}
	return nil
}

// apply hands a fetched batch to the store, with the checkpoint after it.
func (run *restoreRun) apply(batch []kread.Record, next int64) error {
	entries := make([]kvstore.Entry, 0, len(batch))
	for _, rec := range batch {
		if run.r.Convert == nil {
			entries = append(entries, kvstore.Entry{Key: rec.Key, Value: rec.Value})
			continue
		}
		k, v, skip, err := run.r.Convert(rec)
		if err != nil || skip {
			continue
		}
		entries = append(entries, kvstore.Entry{Key: k, Value: v})
	}
	var err error
	if run.bulk != nil {
		err = run.bulk.Add(entries, next)
	} else {
		err = run.sr.Add(entries, next)
	}
	if err != nil {
		return run.fail("apply batch", err)
	}
	run.res.Records += int64(len(batch))
	return nil
}

// interrupted ends a restore stopped by its context: a tail restore keeps its progress,
// a restore from empty keeps nothing.
func (run *restoreRun) interrupted(at int64, cause error) error {
	if run.bulk != nil {
		if err := run.bulk.Abort(); err != nil {
			return run.fail("", err)
		}
		run.logger.Info("restore in key order interrupted; the store stays as it was (empty, or at its checkpoint)", "at", at, "end", run.end, "records", run.res.Records)
		return cause
	}
	if err := run.sr.Finish(); err != nil {
		return run.fail("apply batch", err)
	}
	run.logger.Info("restore interrupted; progress kept", "at", at, "end", run.end, "records", run.res.Records)
	return cause
}

// startOver wipes the store after the changelog was truncated under the restore and
// returns the new log start to read from.
func (run *restoreRun) startOver(ctx context.Context) (int64, error) {
	if run.bulk != nil {
		if err := run.bulk.Abort(); err != nil {
			return 0, run.fail("", err)
		}
		run.bulk = nil // a tail's restorer: the wiped store is restored from empty
	} else if err := run.sr.Finish(); err != nil {
		return 0, run.fail("apply batch", err)
	}
	if err := run.backend.Wipe(run.store); err != nil {
		return 0, run.fail("wipe", err)
	}
	if err := run.recordTopicID(); err != nil { // the wipe forgot it
		return 0, err
	}
	logStart, end, err := run.endOffsets(ctx)
	if err != nil {
		return 0, run.fail("", err)
	}
	if run.r.HasUntil && run.r.Until < end {
		end = run.r.Until
	}
	run.res.Wiped, run.res.To, run.end = true, end, end
	return logStart, run.startBulk()
}

// finish makes what was read durable: the bulk load in key order, or the last write.
func (run *restoreRun) finish(ctx context.Context) error {
	var loadTime time.Duration
	if run.bulk != nil {
		runs, loadStart := run.bulk.Runs(), time.Now()
		if err := run.bulk.Finish(ctx); err != nil {
			if ctx.Err() != nil {
				run.logger.Info("restore in key order interrupted while loading; the store stays as it was (empty, or at its checkpoint)", "records", run.res.Records)
				return err
			}
			return run.fail("", err)
		}
		loadTime = time.Since(loadStart)
		run.logger.Debug("store loaded in key order", "run_files", runs, "load", loadTime.Round(time.Millisecond))
	} else if err := run.sr.Finish(); err != nil {
		return run.fail("apply batch", err)
	}
	took := time.Since(run.began)
	rate := float64(run.res.Records) / took.Seconds()
	total := run.end - run.from
	run.r.report(Progress{Store: run.store, Topic: run.topic, Partition: run.partition, Done: total, Total: total, End: run.end, Rate: rate, Finished: true})
	run.logger.Info("store restored", "records", run.res.Records, "offsets", total, "duration", took.Round(time.Millisecond), "records_per_sec", int64(rate), "key_order_load", loadTime.Round(time.Millisecond))
	return nil
}

func (r *Restorer) report(p Progress) {
	if r.OnProgress != nil {
		r.OnProgress(p)
	}
}

// fetchAhead reads a changelog partition one fetch ahead of the restore: while the
// store takes one fetch's records, the next fetch is under way, so the broker's round
// trip overlaps the store work (a restoring task otherwise waits for each fetch in
// turn). At most one fetch is outstanding; its goroutine is owned by the restore, which
// waits for it in stop (a fetch ends within the client's timeouts, as a synchronous one
// does).
type fetchAhead struct {
	client    sarama.Client
	topic     string
	partition int32
	maxBytes  int32
	pending   chan fetchResult // the outstanding fetch, at offset at; nil if none
	at        int64
}

type fetchResult struct {
	batch []kread.Record
	next  int64
	err   error
}

// fetch returns what kread.Fetch returns for next, from the fetch ahead if it is at
// next, and starts the fetch after it.
func (f *fetchAhead) fetch(next, end int64) ([]kread.Record, int64, error) {
	var res fetchResult
	if f.pending != nil && f.at == next {
		res = <-f.pending
		f.pending = nil
	} else {
		f.stop()
		res.batch, res.next, res.err = kread.Fetch(f.client, f.topic, f.partition, next, end, f.maxBytes)
	}
	if res.err == nil && res.next > next && res.next < end {
		ch := make(chan fetchResult, 1)
		f.pending, f.at = ch, res.next
		go func(at int64) {
			var r fetchResult
			r.batch, r.next, r.err = kread.Fetch(f.client, f.topic, f.partition, at, end, f.maxBytes)
			ch <- r
		}(res.next)
	}
	return res.batch, res.next, res.err
}

// stop waits for the outstanding fetch, if any, and drops it.
func (f *fetchAhead) stop() {
	if f.pending != nil {
		<-f.pending
		f.pending = nil
	}
}
