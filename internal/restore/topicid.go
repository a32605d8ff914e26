package restore

import (
	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
)

// The changelog's topic ID (Kafka 2.8+) is recorded with the store
// (kvstore.Backend.SetChangelogID): offsets alone cannot tell a changelog deleted and
// created anew from the one the checkpoint counts once the new one holds as many
// records (an "eddy reset" that missed this host's state dir, then a rebuild on another
// host: the restore read only the new tail, on top of the store from before the reset).
// A store whose recorded ID is not the topic's is restored from empty.
//
// A store written before IDs were recorded has none: its checkpoint is trusted on its
// offsets alone, as before, and the restore records the topic's current ID, so the
// check holds from then on; a changelog recreated before that restore goes unnoticed
// unless its offsets give it away. A broker that gives no IDs (before 2.8) leaves
// stores without one.

// checkpoint reads the store's checkpoint and the changelog's current ID; a checkpoint
// recorded for another topic of the changelog's name counts as none (the store is then
// wiped and restored from the start). Call it after reading the end offsets: a topic
// made anew in between then shows its new ID, and the store is restored from empty
// rather than given the new topic's tail.
func (run *restoreRun) checkpoint() (int64, bool, error) {
	cp, ok, err := run.backend.Checkpoint(run.store)
	if err != nil {
		return 0, false, run.fail("read checkpoint", err)
	}
	id, err := kread.TopicID(run.r.Client, run.topic)
	if err != nil {
		return 0, false, run.fail("read the changelog's topic ID", err)
	}
	run.topicID = id
	if !ok || id == (sarama.Uuid{}) {
		return cp, ok, nil
	}
	recorded, known, err := run.backend.ChangelogID(run.store)
	if err != nil {
		return 0, false, run.fail("read the changelog ID", err)
	}
	if known && sarama.Uuid(recorded) != id {
		run.logger.Warn("CHANGELOG RECREATED: the store's checkpoint counts offsets of an earlier topic of this name (its topic ID differs); wiping the store and restoring it all",
			"checkpoint", cp, "recorded_id", sarama.Uuid(recorded).String(), "current_id", id.String())
		return cp, false, nil
	}
	return cp, ok, nil
}

// recordTopicID records the changelog's ID with the store, once the restore has decided
// that the store holds (a prefix of) this topic or nothing: before it writes anything
// read from it.
func (run *restoreRun) recordTopicID() error {
	if run.topicID == (sarama.Uuid{}) {
		return nil
	}
	recorded, known, err := run.backend.ChangelogID(run.store)
	if err != nil {
		return run.fail("read the changelog ID", err)
	}
	if known && sarama.Uuid(recorded) == run.topicID {
		return nil
	}
	if err := run.backend.SetChangelogID(run.store, run.topicID); err != nil {
		return run.fail("record the changelog ID", err)
	}
	return nil
}
