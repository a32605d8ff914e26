package eddy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/processor"
)

// The state each member holds of each stateful task, for the leader's plan (Kafka
// Streams' task offset sums, KIP-441): the member reports its offset sums in its
// subscription (taskOffsets) and the leader subtracts them from the changelogs' end
// offsets (changelogEnds) to find each holder's lag (assignor.readLags).

// taskOffsets reports, for the group subscription, the state this instance holds of
// each task with stores a standby keeps: caughtUp for its active tasks, the sum of a
// standby's checkpoints, and the sum of the checkpoints in a task dir left from
// earlier (read from the file, which nothing here has open). A task whose kept stores
// do not all have a checkpoint is left out (its lag is unknown).
func (rt *runtime) taskOffsets() map[processor.TaskID]int64 {
	out := map[processor.TaskID]int64{}
	for _, t := range rt.registry.all() {
		if rt.assignor.stateful[t.id.Subtopology] {
			out[t.id] = caughtUp
		}
	}
	open := map[processor.TaskID]bool{}
	for _, sb := range rt.standbyInfos() {
		open[sb.ID] = true
		if _, ok := out[sb.ID]; ok {
			continue
		}
		if sum, ok := rt.keptSum(sb.ID, sb.Checkpoints); ok {
			out[sb.ID] = sum
		}
	}
	for _, id := range rt.localState() {
		if _, ok := out[id]; ok || open[id] || !rt.assignor.stateful[id.Subtopology] {
			continue
		}
		cps, err := kvstore.ReadCheckpoints(filepath.Join(rt.appDir, id.String()), kvstore.InspectOptions{LockTimeout: 50 * time.Millisecond})
		if err != nil {
			rt.logger.Debug("reading a task dir's checkpoints for the group failed; reporting no lag for it", "task", id.String(), "error", err)
			continue
		}
		if sum, ok := rt.keptSum(id, cps); ok {
			out[id] = sum
		}
	}
	return out
}

// keptSum sums the checkpoints of the stores a standby keeps of task id; false when
// one of them has none.
func (rt *runtime) keptSum(id processor.TaskID, checkpoints map[string]int64) (int64, bool) {
	sub := rt.g.Subtopologies[id.Subtopology]
	var sum int64
	for _, st := range sub.Stores {
		if !standbyKeeps(st) {
			continue
		}
		cp, ok := checkpoints[st.Name]
		if !ok {
			return 0, false
		}
		sum += cp
	}
	return sum, true
}

// changelogEnds sums, for the leader's plan, the last stable offsets of the kept
// stores' changelog partitions of each task; a task one of whose offsets cannot be
// read is left out. The reads share one bound, planLagBudget, and a changelog that
// failed once is not asked again in the same plan: the leader plans inside the
// rebalance, and a deleted changelog took 21 s per task of sarama's metadata retries,
// which held every rebalance past its members' patience (CI run on 2953e64:
// TestDeletedChangelogStopsTheAppAfterTaskTimeout never saw the tasks move).
func (rt *runtime) changelogEnds(tasks []processor.TaskID) map[processor.TaskID]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), planLagBudget)
	defer cancel()
	out := map[processor.TaskID]int64{}
	failed := map[string]error{}
	var unread []string // tasks left without an end
	for _, id := range tasks {
		var sum int64
		ok := true
		for _, st := range rt.g.Subtopologies[id.Subtopology].Stores {
			if !standbyKeeps(st) {
				continue
			}
			topic := names.ChangelogTopic(rt.cfg.ApplicationID, st.Name)
			if failed[topic] != nil || ctx.Err() != nil {
				ok = false
				break
			}
			end, err := kread.ListOffsetAt(ctx, rt.client, topic, id.Partition, sarama.OffsetNewest, sarama.ReadCommitted)
			if err != nil {
				failed[topic] = fmt.Errorf("%s/%d: %w", topic, id.Partition, err)
				ok = false
				break
			}
			sum += end
		}
		if ok {
			out[id] = sum
		} else {
			unread = append(unread, id.String())
		}
	}
	// One line per plan, at Warn: tasks without an end are placed as if no member held
	// their state, so they may restore in full where a member had them nearly current.
	// (At Debug, one line per task, a leader that could not read a changelog said nothing
	// at the default level.)
	if len(unread) > 0 {
		errs := make([]error, 0, len(failed)+1)
		for _, topic := range slices.Sorted(maps.Keys(failed)) {
			errs = append(errs, failed[topic])
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("the plan's budget of %v for these reads ran out: %w", planLagBudget, err))
		}
		rt.logger.Warn("reading changelog end offsets for the assignment failed; these tasks are placed as if no member held their state (a member that has it may restore it again)",
			"tasks", unread, "error", errors.Join(errs...))
	}
	return out
}

// planLagBudget bounds the leader's reading of changelog end offsets for one plan;
// tasks left without an end are placed as if no member held their state.
const planLagBudget = 3 * time.Second
