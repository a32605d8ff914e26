// Package changelog is what a user or an operator reads of eddy's internal topics: their
// names, what a store's restore did, and the errors a restore can fail with.
//
// Every logged store has a compacted changelog topic, <applicationID>-<store>-changelog,
// with one partition per task: partition p holds the changes of the store in task
// <subtopology>_p. The task's commit writes one record per changed key (the last value;
// nil for a delete) inside its Kafka transaction, so the changelog's committed prefix is
// exactly the store's history. When a task starts on an instance, the runtime restores
// its stores from their changelogs, from the local checkpoint to the changelog's last
// stable offset, and reports each restore as a Result (eddy.Config.OnRestore).
//
// A sub-topology that re-keys its records writes them to a repartition topic,
// <applicationID>-<name>-repartition, read by the next sub-topology.
package changelog

import (
	"errors"
	"time"

	"github.com/eddy-streams/eddy/internal/names"
)

// TopicName is the changelog topic of a store: <applicationID>-<store>-changelog.
func TopicName(appID, store string) string { return names.ChangelogTopic(appID, store) }

// RepartitionTopicName is a repartition topic: <applicationID>-<name>-repartition.
func RepartitionTopicName(appID, name string) string { return names.RepartitionTopic(appID, name) }

// Result says what a restore did.
type Result struct {
	Store string
	// From and To are the offsets read: [From, To).
	From, To int64
	// Records is the number of changelog records read and applied (a key written
	// several times within one fetch is applied once, with its last value).
	Records int64
	// Wiped is true when the store was emptied first: it had no checkpoint, or its
	// checkpoint was outside the changelog (the topic was recreated or truncated) or
	// recorded for an earlier topic of the changelog's name (another topic ID).
	Wiped    bool
	Duration time.Duration
}

// ErrRestore is wrapped by restore failures that are not the context's.
var ErrRestore = errors.New("changelog restore failed")

// ErrMarkersPending is wrapped by a restore that found a transaction open on the
// changelog partition that did not end within the restore's wait for it: the commit
// markers of the store's own last transaction not written yet, or the transaction of
// another producer (a previous owner of the task that stalled or died in a commit),
// which holds the last stable offset below records committed after it until it ends
// (at the latest when the broker aborts it past its transaction timeout). The store is
// left as it is; retrying later is safe.
var ErrMarkersPending = errors.New("commit markers pending on the changelog")
