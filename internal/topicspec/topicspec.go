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
