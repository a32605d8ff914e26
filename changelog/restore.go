package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/statestore"
)

// Progress describes a restore under way.
type Progress struct {
	Store     string
	Topic     string
	Partition int32
	// Done and Total count offsets (records and transaction markers) from the start of
	// this restore to the end offset.
	Done, Total int64
	// Rate is the records applied per second so far.
	Rate     float64
	Finished bool
}

// Result says what a restore did.
type Result struct {
	Store string
	// From and To are the offsets read: [From, To).
	From, To int64
	// Records is the number of changelog records read and applied (a key written
	// several times within one fetch is applied once, with its last value).
	Records int64
	// Wiped is true when the store was emptied first: it had no checkpoint, or its
	// checkpoint was outside the changelog (the topic was recreated or truncated).
	Wiped    bool
	Duration time.Duration
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
	// FetchMaxBytes bounds one fetch; default 2 MiB. Larger fetches read no faster
	// (BENCHMARKS.md) but every restoring task holds one in memory, and its records
	// until they are written.
	FetchMaxBytes int32
	// FromEmpty bounds the memory of a restore from empty (no checkpoint, or wiped): it
	// gathers each key's last value, spilling sorted runs to files in the task's state
	// dir above FromEmpty.MaxBytes, and loads the store in key order at the end
	// (statestore.BulkRestorer). Zero values are statestore's defaults.
	FromEmpty statestore.BulkRestorerOptions
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
	NoBulk bool
}

// ErrRestore is wrapped by restore failures that are not the context's.
var ErrRestore = errors.New("changelog restore failed")

// ErrMarkersPending is wrapped by a restore that found the store's checkpoint above the
// changelog's last stable offset but not above its high-water mark, and the last stable
// offset did not reach the checkpoint within Restorer.MarkersWait. The checkpoint was
// written after the store's last transaction committed, so the commit markers of that
// transaction (or of a transaction of another producer that began before it) are not
// written yet. The store is left as it is; retrying later is safe.
var ErrMarkersPending = errors.New("commit markers pending on the changelog")

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
			return end, fmt.Errorf("%w: checkpoint %d, last stable offset %d, high-water mark %d of %s/%d after %v", ErrMarkersPending, cp, end, hwm, topic, partition, wait)
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

// EndOffsets returns a changelog partition's log start offset and its last stable offset
// (read_committed end offset).
func EndOffsets(client sarama.Client, topic string, partition int32) (start, end int64, err error) {
	return kread.EndOffsets(client, topic, partition)
}

// Restore brings store (kept in backend) up to the last stable offset of partition of
// its changelog topic, starting at the store's checkpoint. With no checkpoint, one below
// the log start, or one above the high-water mark (the topic was recreated), the store
// is wiped and read from the start, in key order when the backend supports it (see
// Restorer.FromEmpty; such a restore keeps no progress when interrupted: the store stays
// empty with no checkpoint). A checkpoint between the last stable offset and the
// high-water mark means markers pending: Restore waits for them (MarkersWait) and fails
// with ErrMarkersPending, leaving the store as it is, if they do not come. Fetched batches
// are gathered into large sorted backend writes (statestore.Restorer), each carrying the
// checkpoint of its last batch, so a restore stopped by ctx (a rebalance) keeps its
// progress and resumes there.
func (r *Restorer) Restore(ctx context.Context, backend statestore.Backend, store, topic string, partition int32) (Result, error) {
	began := time.Now()
	res := Result{Store: store}
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("store", store, "changelog", topic, "partition", partition)
	start, end, err := EndOffsets(r.Client, topic, partition)
	if err != nil {
		return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
	}
	cp, ok, err := backend.Checkpoint(store)
	if err != nil {
		return res, fmt.Errorf("%w: store %q: read checkpoint: %w", ErrRestore, store, err)
	}
	if r.HasUntil && r.Until < end {
		end = r.Until
		if ok && cp > end && cp >= start {
			logger.Warn("store is ahead of the committed input offset; keeping it", "checkpoint", cp, "committed", end)
			res.From, res.To = cp, cp
			return res, nil
		}
	}
	if ok && cp > end && cp >= start {
		// Either the changelog was recreated, or the store's own last commit has its
		// markers still pending; the high-water mark tells which.
		if end, err = r.awaitMarkers(ctx, logger, topic, partition, cp, end); err != nil {
			return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
		}
	}
	from := cp
	if !ok || cp > end || cp < start {
		if ok {
			logger.Warn("checkpoint outside the changelog (recreated or truncated); wiping the store and restoring it all", "checkpoint", cp, "log_start", start, "end", end)
		}
		if err := backend.Wipe(store); err != nil {
			return res, fmt.Errorf("%w: store %q: wipe: %w", ErrRestore, store, err)
		}
		res.Wiped = true
		from = start
	}
	res.From, res.To = from, end
	if from >= end {
		res.Duration = time.Since(began)
		r.report(Progress{Store: store, Topic: topic, Partition: partition, Finished: true})
		return res, nil
	}
	logger.Info("restoring store", "from", from, "to", end, "offsets", end-from, "wiped", res.Wiped)

	every := r.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	maxBytes := r.FetchMaxBytes
	if maxBytes <= 0 {
		maxBytes = 2 << 20
	}
	next := from
	lastLog := time.Now()
	empty := 0
	// The store-side restorer gathers fetches into large sorted writes, each with its
	// checkpoint; Finish makes them durable.
	sr := statestore.NewRestorer(backend, store, statestore.RestorerOptions{})
	// A store restored from empty is built in key order instead (statestore.BulkRestorer).
	var bulk *statestore.BulkRestorer
	if res.Wiped && !r.NoBulk && statestore.CanBulkRestore(backend) {
		if bulk, err = statestore.NewBulkRestorer(backend, store, r.FromEmpty); err != nil {
			return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
		}
	}
	ahead := &fetchAhead{client: r.Client, topic: topic, partition: partition, maxBytes: maxBytes}
	defer ahead.stop()
	for next < end {
		if err := ctx.Err(); err != nil {
			if bulk != nil {
				if aerr := bulk.Abort(); aerr != nil {
					return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, aerr)
				}
				logger.Info("restore from empty interrupted; the store stays empty", "at", next, "end", end, "records", res.Records)
				res.Duration = time.Since(began)
				return res, err
			}
			if ferr := sr.Finish(); ferr != nil {
				return res, fmt.Errorf("%w: store %q: apply batch: %w", ErrRestore, store, ferr)
			}
			logger.Info("restore interrupted; progress kept", "at", next, "end", end, "records", res.Records)
			res.Duration = time.Since(began)
			return res, err
		}
		batch, newNext, err := ahead.fetch(next, end)
		if err != nil {
			if errors.Is(err, sarama.ErrOffsetOutOfRange) {
				// The log start moved past us (truncated): what we have is not a prefix
				// of the log any more.
				logger.Warn("changelog truncated under the restore; starting over", "at", next)
				ahead.stop()
				if bulk != nil {
					if err := bulk.Abort(); err != nil {
						return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
					}
				} else if err := sr.Finish(); err != nil {
					return res, fmt.Errorf("%w: store %q: apply batch: %w", ErrRestore, store, err)
				}
				if err := backend.Wipe(store); err != nil {
					return res, fmt.Errorf("%w: store %q: wipe: %w", ErrRestore, store, err)
				}
				if start, end, err = EndOffsets(r.Client, topic, partition); err != nil {
					return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
				}
				res.Wiped, next, res.To = true, start, end
				if bulk == nil && !r.NoBulk && statestore.CanBulkRestore(backend) {
					if bulk, err = statestore.NewBulkRestorer(backend, store, r.FromEmpty); err != nil {
						return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
					}
				}
				continue
			}
			return res, fmt.Errorf("%w: store %q: fetch %s/%d at %d: %w", ErrRestore, store, topic, partition, next, err)
		}
		if newNext == next {
			empty++
			if empty > 20 {
				return res, fmt.Errorf("%w: store %q: no progress at offset %d of %s/%d below end offset %d", ErrRestore, store, next, topic, partition, end)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		empty = 0
		entries := make([]statestore.Entry, 0, len(batch))
		for _, rec := range batch {
			if r.Convert == nil {
				entries = append(entries, statestore.Entry{Key: rec.Key, Value: rec.Value})
				continue
			}
			k, v, skip, err := r.Convert(rec)
			if err != nil || skip {
				continue
			}
			entries = append(entries, statestore.Entry{Key: k, Value: v})
		}
		if bulk != nil {
			err = bulk.Add(entries, newNext)
		} else {
			err = sr.Add(entries, newNext)
		}
		if err != nil {
			return res, fmt.Errorf("%w: store %q: apply batch: %w", ErrRestore, store, err)
		}
		res.Records += int64(len(batch))
		next = newNext
		rate := float64(res.Records) / time.Since(began).Seconds()
		r.report(Progress{Store: store, Topic: topic, Partition: partition, Done: next - from, Total: end - from, Rate: rate})
		if time.Since(lastLog) >= every {
			lastLog = time.Now()
			logger.Info("restoring store", "done", next-from, "remaining", end-next, "records_per_sec", int64(rate))
		}
	}
	var loadTime time.Duration
	if bulk != nil {
		runs, loadStart := bulk.Runs(), time.Now()
		if err := bulk.Finish(ctx); err != nil {
			if ctx.Err() != nil {
				logger.Info("restore from empty interrupted while loading; the store stays empty", "records", res.Records)
				res.Duration = time.Since(began)
				return res, err
			}
			return res, fmt.Errorf("%w: store %q: %w", ErrRestore, store, err)
		}
		loadTime = time.Since(loadStart)
		logger.Debug("store loaded in key order", "run_files", runs, "load", loadTime.Round(time.Millisecond))
	} else if err := sr.Finish(); err != nil {
		return res, fmt.Errorf("%w: store %q: apply batch: %w", ErrRestore, store, err)
	}
	res.Duration = time.Since(began)
	rate := float64(res.Records) / res.Duration.Seconds()
	r.report(Progress{Store: store, Topic: topic, Partition: partition, Done: end - from, Total: end - from, Rate: rate, Finished: true})
	logger.Info("store restored", "records", res.Records, "offsets", end-from, "duration", res.Duration.Round(time.Millisecond), "records_per_sec", int64(rate), "key_order_load", loadTime.Round(time.Millisecond))
	return res, nil
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
