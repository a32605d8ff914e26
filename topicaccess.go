package eddy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/IBM/sarama"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/topicspec"
)

// topicAccess is an operation the application's principal needs on a topic, and why.
type topicAccess struct {
	op  sarama.AclOperation
	why string
}

// topicAccessNeeded lists, per topic, the operations an application needs: READ on its
// source topics, WRITE on its sinks and dead-letter topic, READ and WRITE on its
// internal topics (DESCRIBE on all of them is checked by describe).
func topicAccessNeeded(g *graph.Graph, cfg Config, internal []topicspec.Spec) map[string][]topicAccess {
	need := map[string][]topicAccess{}
	add := func(topic string, op sarama.AclOperation, why string) {
		if !slices.ContainsFunc(need[topic], func(a topicAccess) bool { return a.op == op }) {
			need[topic] = append(need[topic], topicAccess{op, why})
		}
	}
	for _, s := range g.Subtopologies {
		for _, t := range s.SourceTopics {
			add(t, sarama.AclOperationRead, fmt.Sprintf("source of sub-topology %d", s.ID))
		}
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink && !n.Internal {
				add(n.Topics[0], sarama.AclOperationWrite, fmt.Sprintf("sink %q", n.Name))
			}
		}
	}
	if cfg.deadLettering() {
		add(cfg.DeadLetterTopic, sarama.AclOperationWrite, "dead-letter topic")
	}
	for _, s := range internal {
		add(s.Name, sarama.AclOperationRead, "internal topic")
		add(s.Name, sarama.AclOperationWrite, "internal topic")
	}
	return need
}

// authorizedOpsUnknown is what a broker answers for a topic's authorized operations when
// it does not report them (KIP-430: INT32_MIN).
const authorizedOpsUnknown = math.MinInt32

// checkTopicAccess refuses to start, naming the topic and the operation, when the
// brokers say the application's principal lacks an operation it needs on a topic
// (Metadata v8+ reports a topic's authorized operations, KIP-430). Without this check a
// missing WRITE shows only when a task's transaction first adds a partition, seconds
// later, and on that path sarama 1.61.1 has a data race inside its transaction manager
// (docs/kafka-notes.md). A broker without an authorizer reports every operation; one
// that does not report them is not checked.
func (rt *runtime) checkTopicAccess(need map[string][]topicAccess) error {
	topics := keys(need)
	if len(topics) == 0 || !rt.sc.Version.IsAtLeast(sarama.V2_3_0_0) {
		return nil
	}
	req := sarama.NewMetadataRequest(rt.sc.Version, topics)
	req.IncludeTopicAuthorizedOperations = true
	b := rt.client.LeastLoadedBroker()
	if b == nil {
		return nil // the consumer group's connection reports the cluster being away
	}
	if ok, _ := b.Connected(); !ok {
		if err := b.Open(rt.sc); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
			return nil
		}
	}
	resp, err := b.GetMetadata(req)
	if err != nil {
		// Not a refusal: the operations' own requests meet whatever this was.
		rt.logger.Debug("checking the topics' authorized operations", "error", err)
		return nil
	}
	for _, t := range resp.Topics {
		if !errors.Is(t.Err, sarama.ErrNoError) || t.TopicAuthorizedOperations == authorizedOpsUnknown {
			continue
		}
		for _, a := range need[t.Name] {
			if t.TopicAuthorizedOperations&(1<<int32(a.op)) == 0 {
				return fmt.Errorf("eddy: topic %q (%s): the broker does not authorize %s on it: %w",
					t.Name, a.why, strings.ToUpper(a.op.String()), sarama.ErrTopicAuthorizationFailed)
			}
		}
	}
	return nil
}
