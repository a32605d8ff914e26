package eddy

// Reading a global store's topic: where a store starts (its checkpoints, unless its
// topic was recreated), where a read ends (the last stable offset, once the
// transactions open at the bootstrap have ended) and the read itself.

import (
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
)

// checkTopicID wipes a global store whose recorded topic ID is not its topic's: the
// topic was deleted and created anew, and the store's checkpoints count offsets of the
// old one (kept, a new topic that holds as many records would be read from there, on
// top of the old one's data). Otherwise it records the ID, for a store that has none
// (new, wiped, or written before IDs were recorded: such checkpoints are trusted on
// their offsets, as before). A broker that gives no IDs leaves the store without one.
func (g *globalState) checkTopicID(gs *graph.GlobalStore) (recreated bool, err error) {
	id, err := kread.TopicID(g.client, gs.Topic)
	if err != nil || id == (sarama.Uuid{}) {
		return false, err
	}
	recorded, known, err := g.backend.ChangelogID(gs.Store.Name)
	if err != nil {
		return false, err
	}
	if known && sarama.Uuid(recorded) == id {
		return false, nil
	}
	if known {
		g.logger.Warn("GLOBAL TOPIC RECREATED: the global store's checkpoints count offsets of an earlier topic of this name (its topic ID differs); reading the store again from the start",
			"store", gs.Store.Name, "topic", gs.Topic, "recorded_id", sarama.Uuid(recorded).String(), "current_id", id.String())
		// The wipe forgets the ID with the checkpoints; a crash before the next
		// line leaves an empty store with neither, read from the start.
		if err := g.backend.Wipe(gs.Store.Name); err != nil {
			return false, err
		}
	}
	return known, g.backend.SetChangelogID(gs.Store.Name, id)
}

// endOffsets returns partition p's log start and the offset to read up to: its last
// stable offset, and, while the stores bootstrap (no task has started), only once every
// transaction open on the partition has ended (kread.StableOffsets). A transaction left
// open by a producer that stalled or died holds the last stable offset below records
// committed after it, and the tasks would start without them. Past the wait's bound (a
// producer of the topic with a longer transaction timeout than this application's) the
// bootstrap goes on with the last stable offset and a warning. Once the stores are up,
// each read goes on from where the last one stopped, so a record behind an open
// transaction is read when the transaction ends, never skipped.
func (g *globalState) endOffsets(ctx context.Context, client sarama.Client, gs *graph.GlobalStore, p int32) (start, end int64, err error) {
	g.mu.Lock()
	ready := g.ready
	g.mu.Unlock()
	if ready {
		return kread.EndOffsets(client, gs.Topic, p)
	}
	wait := g.stableWait
	if wait <= 0 {
		wait = kread.StableBound(10 * time.Second)
	}
	start, end, err = kread.StableOffsets(ctx, client, gs.Topic, p, wait, func(lastStable, highWater int64) {
		g.logger.Info("a transaction is open on a global store's topic; waiting for it to end before the tasks start, since records committed behind it lie above the last stable offset",
			"store", gs.Store.Name, "topic", gs.Topic, "partition", p, "last_stable_offset", lastStable, "high_water_mark", highWater, "bound", wait)
	})
	if errors.Is(err, kread.ErrTransactionOpen) {
		g.logger.Warn("a transaction on a global store's topic is still open; the tasks start without the records committed behind it, which are read once it ends",
			"store", gs.Store.Name, "error", err)
		err = nil
	}
	return start, end, err
}

// readPartition applies partition p of a global store's topic from offset from up to
// end (its last stable offset), in writes of up to 4096 entries, each with the
// checkpoint it reaches; it returns the offset the store reflects.
func (g *globalState) readPartition(ctx context.Context, client sarama.Client, gs *graph.GlobalStore, p int32, from, end int64) (int64, error) {
	ckName := names.GlobalCheckpoint(gs.Store.Name, p)
	var batch []kvstore.Entry
	last := from
	flush := func() error {
		err := g.backend.Write(kvstore.Batch{
			Writes:      map[string][]kvstore.Entry{gs.Store.Name: batch},
			Checkpoints: map[string]int64{ckName: last},
		})
		batch = batch[:0]
		return err
	}
	err := kread.ReadRange(ctx, client, gs.Topic, p, from, end, func(r kread.Record) error {
		rec := graph.RawRecord{Topic: gs.Topic, Partition: p, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		k, v, skip, err := gs.Entry(rec)
		if err != nil {
			return &globalRecordError{topic: gs.Topic, partition: p, offset: r.Offset, err: err}
		}
		if !skip {
			batch = append(batch, kvstore.Entry{Key: k, Value: v})
		}
		last = r.Offset + 1
		if len(batch) >= 4096 {
			return flush()
		}
		return nil
	})
	// The range ends at the last stable offset, which may be a transaction marker:
	// the store reflects the topic up to end.
	if err == nil {
		last = end
	}
	if ferr := flush(); ferr != nil && err == nil {
		err = ferr
	}
	return last, err
}

// catchUpAll reads every partition of one store from the start, after a wipe.
func (g *globalState) catchUpAll(ctx context.Context, client sarama.Client, gs *graph.GlobalStore, next map[int32]int64) error {
	parts, err := client.Partitions(gs.Topic)
	if err != nil {
		return err
	}
	for _, p := range parts {
		start, _, err := kread.EndOffsets(client, gs.Topic, p)
		if err != nil {
			return err
		}
		next[p] = start
		if err := g.catchUpPartition(ctx, client, gs, p, next); err != nil {
			return err
		}
	}
	return nil
}
