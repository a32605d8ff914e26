// Package topicspec specifies the internal topics the runtime creates: a store's
// changelog and a repartition topic, with their partition counts and configs.
package topicspec

import "github.com/eddy-streams/eddy/internal/names"

// Spec is an internal topic the runtime creates.
type Spec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// Changelog is the spec of a store's changelog topic, with one partition per task.
func Changelog(appID, store string, tasks int32) Spec {
	return Spec{
		Name:       names.ChangelogTopic(appID, store),
		Partitions: tasks,
		Configs: map[string]string{
			"cleanup.policy": "compact",
			// A changelog is the store's durable copy: never delete by time or size.
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		},
	}
}

// WindowChangelog is the spec of the changelog of a store kept in time segments (window,
// session and join stores): compacted and never deleted by time or size, as Changelog,
// but with "delete" in its cleanup policy, because Kafka refuses DeleteRecords on a topic
// whose policy is compact alone (POLICY_VIOLATION) and the runtime deletes the records
// below the store's oldest live segment (kvstore.Segmented.TrimOffset). With retention.ms
// and retention.bytes at -1 the delete policy itself deletes nothing.
func WindowChangelog(appID, store string, tasks int32) Spec {
	s := Changelog(appID, store, tasks)
	s.Configs["cleanup.policy"] = "compact,delete"
	return s
}

// Repartition is the spec of a repartition topic. Its records are read once by the
// downstream sub-topology, which deletes them once its offsets are committed (the
// runtime's purge, as Kafka Streams'); nothing is deleted by time: a record keeps the
// timestamp of the input it came from, and time-based retention would delete re-keyed
// old input (reprocessing a week-old topic) before it is read.
func Repartition(appID, name string, partitions int32) Spec {
	return Spec{
		Name:       names.RepartitionTopic(appID, name),
		Partitions: partitions,
		Configs: map[string]string{
			"cleanup.policy":  "delete",
			"retention.ms":    "-1",
			"retention.bytes": "-1",
		},
	}
}
