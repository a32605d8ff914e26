// Package changelog names and specifies the internal topics of an application and
// restores stores from their changelogs.
//
// Every logged store has a compacted changelog topic, <applicationID>-<store>-changelog,
// with one partition per task: partition p holds the changes of the store in task
// <subtopology>_p. The task's commit writes one record per changed key (the last value;
// nil for a delete) inside its Kafka transaction, so the changelog's committed prefix is
// exactly the store's history.
//
// The Restorer brings a store from its checkpoint up to the changelog partition's last
// stable offset (never the high-water mark: transaction markers occupy offsets, so a
// reader waiting for the high-water mark can wait forever), reading with read_committed
// and applying the fetched records in large sorted backend writes, each with the
// checkpoint it reaches; a store restored from empty is built in key order instead and
// gets its checkpoint at the end (kvstore.BulkRestorer).
package changelog

import (
	"context"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/names"
)

// TopicName is the changelog topic of a store: <applicationID>-<store>-changelog.
func TopicName(appID, store string) string { return names.ChangelogTopic(appID, store) }

// RepartitionTopicName is a repartition topic: <applicationID>-<name>-repartition.
func RepartitionTopicName(appID, name string) string { return names.RepartitionTopic(appID, name) }

// TopicSpec is an internal topic the runtime creates.
type TopicSpec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// ChangelogSpec is the spec of a changelog topic with one partition per task.
func ChangelogSpec(appID, store string, tasks int32) TopicSpec {
	return TopicSpec{
		Name:       TopicName(appID, store),
		Partitions: tasks,
		Configs: map[string]string{
			"cleanup.policy": "compact",
			// A changelog is the store's durable copy: never delete by time or size.
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		},
	}
}

// RepartitionSpec is the spec of a repartition topic. Its records are read once by the
// downstream sub-topology, which deletes them once its offsets are committed (the
// runtime's purge, as Kafka Streams'); nothing is deleted by time: a record keeps the
// timestamp of the input it came from, and time-based retention would delete re-keyed
// old input (reprocessing a week-old topic) before it is read.
func RepartitionSpec(appID, name string, partitions int32) TopicSpec {
	return TopicSpec{
		Name:       RepartitionTopicName(appID, name),
		Partitions: partitions,
		Configs: map[string]string{
			"cleanup.policy":  "delete",
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		},
	}
}

// ReadLast reads the committed records among the last window offsets of a partition
// (up to its last stable offset) and returns the last value of each key. It serves
// records that are rewritten in full by every transaction, such as a task's offsets
// record: the newest transaction's records are all at the end.
func ReadLast(ctx context.Context, client sarama.Client, topic string, partition int32, window int) (map[string][]byte, error) {
	start, end, err := kread.EndOffsets(client, topic, partition)
	if err != nil {
		return nil, err
	}
	from := max(start, end-int64(window))
	last := map[string][]byte{}
	err = kread.ReadRange(ctx, client, topic, partition, from, end, func(r kread.Record) error {
		last[string(r.Key)] = r.Value
		return nil
	})
	if err != nil {
		return nil, err
	}
	return last, nil
}
