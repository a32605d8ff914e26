// Package kafkaerr names the Kafka error codes that sarama knows only by number.
//
// sarama v1.61.1 declares constants up to 95 but describes none past 89 except 95:
// PRODUCER_FENCED (90) prints as "Unknown error, how did this happen? Error code = 90",
// which is what CI's log showed when a worker was fenced (issue 28). [Explain] rewrites
// such an error's text with the code's protocol name and its meaning, and keeps the
// error chain as it is, so errors.Is(err, sarama.ErrProducerFenced) still holds.
//
// The names and texts are Kafka's own (org.apache.kafka.common.protocol.Errors, the
// protocol guide's error code table), for the codes from 90 on.
package kafkaerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
)

// Code is one Kafka error code's protocol name and meaning.
type Code struct {
	Name    string
	Meaning string
}

// codes holds the error codes sarama does not describe (its KError.Error falls through
// to "Unknown error, how did this happen?" for them).
var codes = map[sarama.KError]Code{
	90:  {"PRODUCER_FENCED", "there is a newer producer with the same transactional ID which fences the current one"},
	91:  {"RESOURCE_NOT_FOUND", "a request illegally referred to a resource that does not exist"},
	92:  {"DUPLICATE_RESOURCE", "a request illegally referred to the same resource twice"},
	93:  {"UNACCEPTABLE_CREDENTIAL", "the requested credential would not meet the criteria for acceptability"},
	94:  {"INCONSISTENT_VOTER_SET", "the voter set in the request is not consistent with the receiver's"},
	96:  {"FEATURE_UPDATE_FAILED", "the feature update could not be applied"},
	97:  {"PRINCIPAL_DESERIALIZATION_FAILURE", "the request principal could not be deserialized"},
	98:  {"SNAPSHOT_NOT_FOUND", "the requested snapshot was not found"},
	99:  {"POSITION_OUT_OF_RANGE", "the requested position is not greater than or equal to zero and less than the size of the snapshot"},
	100: {"UNKNOWN_TOPIC_ID", "this server does not host this topic ID"},
	101: {"DUPLICATE_BROKER_REGISTRATION", "this broker ID is already in use"},
	102: {"BROKER_ID_NOT_REGISTERED", "the given broker ID was not registered"},
	103: {"INCONSISTENT_TOPIC_ID", "the log's topic ID did not match the topic ID in the request"},
	104: {"INCONSISTENT_CLUSTER_ID", "the cluster ID in the request does not match that found on the server"},
	105: {"TRANSACTIONAL_ID_NOT_FOUND", "the transactional ID could not be found"},
	106: {"FETCH_SESSION_TOPIC_ID_ERROR", "the fetch session encountered inconsistent topic ID usage"},
	107: {"INELIGIBLE_REPLICA", "the new ISR contains at least one ineligible replica"},
	108: {"NEW_LEADER_ELECTED", "the AlterPartition request's leader epoch is stale: a new leader was elected"},
	109: {"OFFSET_MOVED_TO_TIERED_STORAGE", "the requested offset is moved to tiered storage"},
	110: {"FENCED_MEMBER_EPOCH", "the member epoch is fenced by the group coordinator: the member must abandon all its partitions and rejoin"},
	111: {"UNRELEASED_INSTANCE_ID", "the instance ID is still used by another member in the consumer group: that member must leave first"},
	112: {"UNSUPPORTED_ASSIGNOR", "the assignor or its version range is not supported by the consumer group"},
	113: {"STALE_MEMBER_EPOCH", "the member epoch is stale: the member must retry after receiving its updated member epoch via the heartbeat"},
	114: {"MISMATCHED_ENDPOINT_TYPE", "the request was sent to an endpoint of the wrong type"},
	115: {"UNSUPPORTED_ENDPOINT_TYPE", "this endpoint type is not supported yet"},
	116: {"UNKNOWN_CONTROLLER_ID", "this controller ID is not known"},
	117: {"UNKNOWN_SUBSCRIPTION_ID", "the client sent a push telemetry request with an invalid or outdated subscription ID"},
	118: {"TELEMETRY_TOO_LARGE", "the client sent a push telemetry request larger than the maximum size the broker will accept"},
	119: {"INVALID_REGISTRATION", "the controller has considered the broker registration to be invalid"},
	120: {"TRANSACTION_ABORTABLE", "the server encountered an error with the transaction: the client can abort the transaction to continue using this transactional ID"},
	121: {"INVALID_RECORD_STATE", "the record state is invalid: the acknowledgement of delivery could not be completed"},
	122: {"SHARE_SESSION_NOT_FOUND", "the share session was not found"},
	123: {"INVALID_SHARE_SESSION_EPOCH", "the share session epoch is invalid"},
	124: {"FENCED_STATE_EPOCH", "the share coordinator rejected the request because the share-group state epoch did not match"},
	125: {"INVALID_VOTER_KEY", "the voter key does not match the receiving replica's key"},
	126: {"DUPLICATE_VOTER", "the voter is already part of the set of voters"},
	127: {"VOTER_NOT_FOUND", "the voter is not part of the set of voters"},
	128: {"INVALID_REGULAR_EXPRESSION", "the regular expression is not valid"},
	129: {"REBOOTSTRAP_REQUIRED", "the client metadata cache is stale: the client must rebootstrap to obtain new metadata"},
	130: {"STREAMS_INVALID_TOPOLOGY", "the supplied topology is invalid"},
	131: {"STREAMS_INVALID_TOPOLOGY_EPOCH", "the supplied topology epoch is invalid"},
	132: {"STREAMS_TOPOLOGY_FENCED", "the supplied topology epoch is outdated"},
	133: {"SHARE_SESSION_LIMIT_REACHED", "the limit of share sessions has been reached"},
}

// Lookup returns the name and meaning of a Kafka error code that sarama does not
// describe, and false for the codes it does (and for unknown ones).
func Lookup(code sarama.KError) (Code, bool) {
	c, ok := codes[code]
	return c, ok
}

// Explain returns err with sarama's text for an undescribed error code replaced by the
// code's name and meaning; the chain is kept (errors.Is and errors.As see through it).
// An error with no such code is returned unchanged, nil included.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	var ke sarama.KError
	if !errors.As(err, &ke) {
		return err
	}
	c, ok := codes[ke]
	if !ok {
		return err
	}
	return &explained{err: err, text: strings.ReplaceAll(err.Error(), ke.Error(), describe(ke, c))}
}

func describe(code sarama.KError, c Code) string {
	return fmt.Sprintf("kafka server: %s (error code %d): %s", c.Name, int16(code), c.Meaning)
}

// explained is an error whose text names its Kafka error code.
type explained struct {
	err  error
	text string
}

func (e *explained) Error() string { return e.text }
func (e *explained) Unwrap() error { return e.err }
