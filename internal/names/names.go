// Package names builds the names of internal topics and transactional IDs. They follow
// Kafka Streams' conventions, so operators' tools and habits carry over.
package names

// ChangelogTopic is the compacted changelog topic of a store: <app>-<store>-changelog.
func ChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// RepartitionTopic is a repartition topic: <app>-<name>-repartition.
func RepartitionTopic(appID, name string) string { return appID + "-" + name + "-repartition" }

// TransactionalID is the transactional ID of a task's producer: <app>-<task>.
func TransactionalID(appID, task string) string { return appID + "-" + task }
