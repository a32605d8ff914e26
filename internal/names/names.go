// Package names builds the names of internal topics and transactional IDs. They follow
// Kafka Streams' conventions, so operators' tools and habits carry over.
package names

import "strconv"

// ChangelogTopic is the compacted changelog topic of a store: <app>-<store>-changelog.
func ChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// RepartitionTopic is a repartition topic: <app>-<name>-repartition.
func RepartitionTopic(appID, name string) string { return appID + "-" + name + "-repartition" }

// TransactionalID is the transactional ID of a task's producer: <app>-<task>.
func TransactionalID(appID, task string) string { return appID + "-" + task }

// OffsetsStorePrefix starts the names of eddy's internal offsets stores, one per
// sub-topology; user stores may not use it.
const OffsetsStorePrefix = "eddy-offsets-"

// OffsetsStore is the internal store in which the tasks of a sub-topology record, in
// each transaction, the input offsets that transaction commits.
func OffsetsStore(subtopology int) string {
	return OffsetsStorePrefix + strconv.Itoa(subtopology)
}

// GlobalCheckpoint names the checkpoint of one partition of a global store's topic in
// the global backend: the offset the store reflects of that partition. ':' cannot be
// in a store name, so it names no store.
func GlobalCheckpoint(store string, partition int32) string {
	return GlobalCheckpointPrefix(store) + strconv.Itoa(int(partition))
}

// GlobalCheckpointPrefix begins the name of every partition checkpoint of store
// (GlobalCheckpoint), and no other store's: ':' cannot be in a store name. A backend's
// Wipe of store forgets the checkpoints under it with the data they describe.
func GlobalCheckpointPrefix(store string) string { return "global:" + store + ":" }
