package eddy

import (
	"fmt"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/restore"
)

// Stores whose changelog is their source topic (topology.ChangelogFromSource: a table
// read from a topic, Kafka Streams' reuse.ktable.source.topics). Such a store writes
// no changelog; its checkpoint is the offset of the source topic it reflects, written
// with the store after the transaction that consumed up to there committed; a restore
// reads the source topic from the checkpoint up to the task's committed input offset,
// not to the topic's end: the records after it are input the task processes again.

// sourceStore returns the graph store of a task's store when its changelog is its
// source topic.
func (t *taskRunner) sourceStore(name string) *graph.Store {
	for _, st := range t.sub.Stores {
		if st.Name == name && st.SourceTopic != "" {
			return st
		}
	}
	return nil
}

// sourceCheckpoints adds to checkpoints, for each store restored from its source topic,
// the input offset the task's commit covers; a store whose topic had no input since the
// last commit keeps its checkpoint.
func (t *taskRunner) sourceCheckpoints(checkpoints map[string]int64) {
	for _, st := range t.sub.Stores {
		if st.SourceTopic == "" {
			continue
		}
		if off, ok := t.work.consumed[st.SourceTopic]; ok {
			checkpoints[st.Name] = off
		}
	}
}

// restoreFromSource configures a restore of st from its source topic: up to the
// committed input offset (the largest of the group's and the task's own record; none
// committed: the topic's start, nothing to restore), each record made into the store's
// entry.
func (t *taskRunner) restoreFromSource(r *restore.Restorer, st *graph.Store) (string, error) {
	topic := st.SourceTopic
	committed := t.committed.of(topic)
	group, err := t.host.groupOffset(topic, t.id.Partition)
	if err != nil {
		return "", fmt.Errorf("task %s: committed offset of %s/%d: %w", t.id, topic, t.id.Partition, err)
	}
	committed = max(committed, group)
	if committed < 0 {
		committed = 0
	}
	r.Until, r.HasUntil = committed, true
	r.Convert = func(rec kread.Record) ([]byte, []byte, bool, error) {
		return st.FromSource(graph.RawRecord{Topic: topic, Partition: t.id.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp})
	}
	return topic, nil
}

// hasSourceStores reports whether the task has a store restored from its source topic,
// whose checkpoint moves with every commit that consumed the topic.
func (t *taskRunner) hasSourceStores() bool {
	for _, st := range t.sub.Stores {
		if st.SourceTopic != "" {
			return true
		}
	}
	return false
}
