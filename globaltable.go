package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/statestore"
)

// globalPoll is how often the global state looks for new records of its topics once
// it is up to date.
const globalPoll = 100 * time.Millisecond

// globalIDCheckEvery bounds how often a running global store asks for its topic's ID
// while a partition is behind its checkpoint (checkTopicID).
const globalIDCheckEvery = 5 * time.Second

// globalState keeps the application's global stores on this instance: Kafka Streams'
// GlobalStreamThread and GlobalStateManager. Every instance reads all partitions of
// each global store's topic into one backend of its own (<StateDir>/<app>/global, a
// bbolt file). The topic is the store's changelog: no other topic is written. Each
// write carries, per topic partition, the offset the store reflects (the checkpoint),
// atomically with the entries, so a restart reads on from there. Before the
// application joins its consumer group (before any task starts) the stores are brought
// up to the topics' last stable offsets (bootstrap); then a goroutine keeps reading
// them while the application runs. Reads are read_committed: a global topic written
// transactionally shows only committed records.
//
// Tasks read the backend concurrently with the updates (bbolt serves reads beside a
// write); a task sees each update as soon as it is written, as Kafka Streams' tasks see
// the global thread's.
type globalState struct {
	// client reads the global topics (the runtime's changelog client, set when the
	// stores start); fail stops the application.
	client  sarama.Client
	fail    func(error)
	stores  []*graph.GlobalStore
	backend kvstore.Backend
	logger  *slog.Logger
	// next is, per store and partition, the offset to read next.
	next map[string]map[int32]int64
	// idChecked is, per store, when its topic's ID was last compared with the one
	// recorded because a partition was behind its checkpoint (checkTopicID).
	idChecked map[string]time.Time
	// stableWait bounds the bootstrap's wait for a transaction open on a partition
	// (endOffsets); zero: kread.StableBound of eddy's default transaction timeout.
	stableWait time.Duration

	stop context.CancelFunc
	done chan struct{}
	// ready is closed once the bootstrap is done.
	mu    sync.Mutex
	ready bool
}

// openGlobal opens the global backend when the topology has global stores.
func (rt *runtime) openGlobal() error {
	if len(rt.g.GlobalStores) == 0 {
		return nil
	}
	dir := filepath.Join(rt.appDir, "global")
	b, rep, err := kvstore.OpenBoltReport(dir, kvstore.BoltOptions{NoSync: rt.cfg.StoreNoSync, Logger: rt.logger})
	if err != nil {
		return fmt.Errorf("eddy: open the global stores: %w", err)
	}
	if rep.Recreated {
		rt.logger.Warn("global store file not usable; starting empty, reading the global topics from their start", "reason", rep.Reason, "moved_to", rep.MovedTo)
	}
	rt.global = &globalState{fail: rt.fail, stores: rt.g.GlobalStores, backend: b, logger: rt.logger.With("global", true), next: map[string]map[int32]int64{}}
	return nil
}

// globalBackend is the backend tasks read the global stores from (nil: none).
func (rt *runtime) globalBackend() kvstore.Backend {
	if rt.global == nil {
		return nil
	}
	return rt.global.backend
}

// startGlobal brings the global stores up to date and starts keeping them so; it
// returns when they are up to date, or with the error that stops the application.
func (rt *runtime) startGlobal(ctx context.Context) error {
	g := rt.global
	if g == nil {
		return nil
	}
	began := time.Now()
	g.client, g.stableWait = rt.restoreC, rt.stableWait()
	if err := g.catchUp(ctx); err != nil {
		return fmt.Errorf("eddy: bootstrap the global stores: %w", err)
	}
	g.logger.Info("global stores up to date", "stores", len(g.stores), "took", time.Since(began).Round(time.Millisecond))
	g.mu.Lock()
	g.ready = true
	g.mu.Unlock()
	runCtx, stop := context.WithCancel(ctx)
	g.stop, g.done = stop, make(chan struct{})
	go func() {
		defer close(g.done)
		g.run(runCtx)
	}()
	return nil
}

// stopGlobal stops the goroutine keeping the global stores, and waits for it.
func (rt *runtime) stopGlobal() {
	if g := rt.global; g != nil && g.stop != nil {
		g.stop()
		<-g.done
	}
}

// closeGlobal closes the global backend; the tasks reading it are closed first.
func (rt *runtime) closeGlobal() {
	if rt.global != nil {
		if err := rt.global.backend.Close(); err != nil {
			rt.logger.Warn("closing the global stores", "error", err)
		}
	}
}

// run keeps the global stores up to date until ctx ends. A failure that does not pass
// (a record that does not deserialize) stops the application; others are retried.
func (g *globalState) run(ctx context.Context) {
	var retry backoff.Backoff
	for {
		err := g.catchUp(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := globalPoll
		if err != nil {
			var bad *globalRecordError
			if errors.As(err, &bad) {
				g.fail(fmt.Errorf("eddy: global stores: %w", err))
				return
			}
			delay = retry.Next()
			g.logger.Warn("reading the global topics failed; retrying", "error", err, "retry_in", delay)
		} else {
			retry.Reset()
		}
		if backoff.Sleep(ctx, delay) != nil {
			return
		}
	}
}

// globalRecordError is a record of a global topic that the store cannot take.
type globalRecordError struct {
	topic     string
	partition int32
	offset    int64
	err       error
}

func (e *globalRecordError) Error() string {
	return fmt.Sprintf("topic %q partition %d offset %d: %v; fix or delete the record (the global store is read from this topic only)", e.topic, e.partition, e.offset, e.err)
}

func (e *globalRecordError) Unwrap() error { return e.err }

// catchUp reads every partition of every global topic from the store's checkpoint to
// the partition's last stable offset.
func (g *globalState) catchUp(ctx context.Context) error {
	client := g.client
	for _, gs := range g.stores {
		parts, err := client.Partitions(gs.Topic)
		if err != nil {
			if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				return fmt.Errorf("%w: %q (the topic of global store %q)", ErrMissingTopic, gs.Topic, gs.Store.Name)
			}
			return fmt.Errorf("topic %q: %w", gs.Topic, err)
		}
		next := g.next[gs.Store.Name]
		if next == nil {
			// The first read of this store in this process: are its checkpoints
			// offsets of this topic?
			if _, err := g.checkTopicID(gs); err != nil {
				return err
			}
			next = map[int32]int64{}
			g.next[gs.Store.Name] = next
		}
		for _, p := range parts {
			if err := g.catchUpPartition(ctx, client, gs, p, next); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *globalState) catchUpPartition(ctx context.Context, client sarama.Client, gs *graph.GlobalStore, p int32, next map[int32]int64) error {
	ckName := names.GlobalCheckpoint(gs.Store.Name, p)
	from, known := next[p]
	if !known {
		off, ok, err := g.backend.Checkpoint(ckName)
		if err != nil {
			return err
		}
		if ok {
			from = off
		}
	}
	start, end, err := g.endOffsets(ctx, client, gs, p)
	if err != nil {
		return err
	}
	if from < start {
		// The records below the log start are gone (retention, or a topic made
		// anew): what the store holds of them cannot be told apart from the rest.
		// Kafka Streams wipes the store and reads it again; here too, for every
		// partition of the store. The wipe forgets every partition's checkpoint in
		// the same write as the data (kvstore.Backend.Wipe): a crash or an error
		// before every partition was read again leaves the rest to be read from
		// their log start, not from checkpoints past records the store lost.
		if known || from > 0 {
			g.logger.Warn("global store is behind its topic's log start; reading it again from the start",
				"store", gs.Store.Name, "topic", gs.Topic, "partition", p, "checkpoint", from, "log_start", start)
			if err := g.backend.Wipe(gs.Store.Name); err != nil {
				return err
			}
			clear(next)
			return g.catchUpAll(ctx, client, gs, next)
		}
		from = start
	}
	if known && from > end && time.Since(g.idChecked[gs.Store.Name]) >= globalIDCheckEvery {
		// Past the partition's end: the topic was deleted and created anew while
		// the store was read (or truncated). Its ID tells; asked at most every
		// globalIDCheckEvery, not at every poll, while the partition stays behind.
		if g.idChecked == nil {
			g.idChecked = map[string]time.Time{}
		}
		g.idChecked[gs.Store.Name] = time.Now()
		recreated, err := g.checkTopicID(gs)
		if err != nil || recreated {
			clear(next)
			if err != nil {
				return err
			}
			return g.catchUpAll(ctx, client, gs, next)
		}
	}
	next[p] = from
	if from >= end {
		return nil
	}
	last, err := g.readPartition(ctx, client, gs, p, from, end)
	next[p] = last
	return err
}

// queryGlobal reads a global store for an interactive query: every instance holds every
// key.
func (rt *runtime) queryGlobal(st *graph.Store, read func(kvstore.Backend) ([]byte, error)) ([]byte, error) {
	g := rt.global
	if g == nil {
		return nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	g.mu.Lock()
	ready := g.ready
	g.mu.Unlock()
	if !ready {
		return nil, fmt.Errorf("%w: global store %q is being read from its topic", ErrNotReady, st.Name)
	}
	return read(g.backend)
}
