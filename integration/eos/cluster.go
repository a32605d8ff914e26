//go:build unix

package eos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/names"
)

// ClusterControl kills, pauses and restarts the brokers of a cluster, for the cluster
// faults. Brokers are named by their node (broker) ID.
type ClusterControl interface {
	// Nodes are the node IDs of the cluster's brokers.
	Nodes() []int32
	// Kill stops a broker at once (SIGKILL), keeping its data.
	Kill(ctx context.Context, node int32) error
	// Restart starts brokers again on their data, together, and returns when they serve.
	Restart(ctx context.Context, nodes ...int32) error
	// Pause stops a broker with SIGSTOP; Resume continues it with SIGCONT.
	Pause(ctx context.Context, node int32) error
	Resume(ctx context.Context, node int32) error
}

// ScriptCluster controls the three-broker cluster of integration/kafka.sh
// (EDDY_KAFKA_BROKERS=3, which it adds to Env): node IDs 1, 2 and 3.
type ScriptCluster struct {
	Script string
	Env    []string
}

func (s ScriptCluster) broker() ScriptBroker {
	return ScriptBroker{Script: s.Script, Env: append(slices.Clone(s.Env), "EDDY_KAFKA_BROKERS=3")}
}

func nodeArgs(nodes []int32) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = strconv.Itoa(int(n))
	}
	return out
}

// Start starts a fresh cluster (its data dirs are wiped) and returns its bootstrap
// addresses.
func (s ScriptCluster) Start(ctx context.Context) ([]string, error) {
	out, err := s.broker().run(ctx, "start")
	if err != nil {
		return nil, err
	}
	return strings.Split(out, ","), nil
}

// Stop stops every broker.
func (s ScriptCluster) Stop(ctx context.Context) error {
	_, err := s.broker().run(ctx, "stop")
	return err
}

// Nodes implements ClusterControl.
func (s ScriptCluster) Nodes() []int32 { return []int32{1, 2, 3} }

// Kill implements ClusterControl with "kafka.sh kill9 N".
func (s ScriptCluster) Kill(ctx context.Context, node int32) error {
	_, err := s.broker().run(ctx, "kill9", nodeArgs([]int32{node})...)
	return err
}

// Restart implements ClusterControl with "kafka.sh restart N...".
func (s ScriptCluster) Restart(ctx context.Context, nodes ...int32) error {
	_, err := s.broker().run(ctx, "restart", nodeArgs(nodes)...)
	return err
}

// Pause implements ClusterControl with "kafka.sh pause N".
func (s ScriptCluster) Pause(ctx context.Context, node int32) error {
	_, err := s.broker().run(ctx, "pause", nodeArgs([]int32{node})...)
	return err
}

// Resume implements ClusterControl with "kafka.sh resume N".
func (s ScriptCluster) Resume(ctx context.Context, node int32) error {
	_, err := s.broker().run(ctx, "resume", nodeArgs([]int32{node})...)
	return err
}

// clusterState is what the harness keeps about the brokers it has faulted.
type clusterState struct {
	client sarama.Client
	// down and paused are the brokers the harness has killed or paused right now.
	down, paused []int32
}

// clusterClient is the harness's client for looking up leaders and coordinators.
func (h *harness) clusterClient() (sarama.Client, error) {
	if h.cl.client == nil {
		c, err := newClient(h.cfg.Brokers)
		if err != nil {
			return nil, err
		}
		h.cl.client = c
	}
	return h.cl.client, nil
}

// victim finds the broker a cluster fault aims at, and says what it is.
func (h *harness) victim(f Fault) (int32, string, error) {
	client, err := h.clusterClient()
	if err != nil {
		return 0, "", err
	}
	leader := func(topics []string) (int32, string, error) {
		topic := topics[f.Target%len(topics)]
		if err := client.RefreshMetadata(topic); err != nil {
			return 0, "", err
		}
		parts, err := client.Partitions(topic)
		if err != nil {
			return 0, "", err
		}
		p := parts[(f.Target/len(topics))%len(parts)]
		b, err := client.Leader(topic, p)
		if err != nil {
			return 0, "", err
		}
		return b.ID(), fmt.Sprintf("leader of %s/%d", topic, p), nil
	}
	switch f.Kind {
	case KillInputLeader:
		return leader([]string{h.names.Input})
	case KillOutputLeader:
		return leader(h.names.OutputTopics())
	case KillChangelogLeader:
		var topics []string
		for _, s := range Stores() {
			topics = append(topics, h.names.Changelog(s))
		}
		return leader(topics)
	case KillTxnCoordinator:
		id, err := h.workerTransactionalID(f.Target)
		if err != nil {
			return 0, "", err
		}
		if err := client.RefreshTransactionCoordinator(id); err != nil {
			return 0, "", err
		}
		b, err := client.TransactionCoordinator(id)
		if err != nil {
			return 0, "", err
		}
		return b.ID(), "transaction coordinator of " + id, nil
	case KillGroupCoordinator:
		if err := client.RefreshCoordinator(h.names.App); err != nil {
			return 0, "", err
		}
		b, err := client.Coordinator(h.names.App)
		if err != nil {
			return 0, "", err
		}
		return b.ID(), "group coordinator of " + h.names.App, nil
	case PauseBroker, TwoBrokersDown:
		nodes := h.cfg.Cluster.Nodes()
		return nodes[f.Target%len(nodes)], "a broker", nil
	}
	return 0, "", fmt.Errorf("eos: %v is not a cluster fault", f.Kind)
}

// injectCluster runs one cluster fault to its end: the brokers are back and every
// partition has all its replicas in sync again (or clusterHealTimeout passed).
func (h *harness) injectCluster(ctx context.Context, f Fault) error {
	cc := h.cfg.Cluster
	node, role, err := h.victim(f)
	if err != nil {
		// A lookup can fail while the cluster is still healing: aim at a broker by the
		// fault's target instead, and say so.
		nodes := cc.Nodes()
		node = nodes[f.Target%len(nodes)]
		role = fmt.Sprintf("broker %d (looking up the %s failed: %v)", node, f.Kind, err)
		h.logger.Warn("eos: cluster fault aims at a broker by chance", "fault", f.Kind.String(), "error", err)
	}
	victims := []int32{node}
	if f.Kind == TwoBrokersDown {
		var others []int32
		for _, n := range cc.Nodes() {
			if n != node {
				others = append(others, n)
			}
		}
		victims = append(victims, others[(f.Target/len(cc.Nodes()))%len(others)])
	}
	h.logger.Info("eos: cluster fault", "fault", f.Kind.String(), "brokers", victims, "aimed_at", role, "at", h.elapsed())
	if h.res.ClusterFaults == nil {
		h.res.ClusterFaults = map[string]int{}
	}
	h.res.ClusterFaults[f.Kind.String()]++
	if f.Kind == PauseBroker {
		h.cl.paused = victims
		if err := cc.Pause(ctx, node); err != nil {
			return err
		}
		h.res.BrokerPauses++
		if err := h.sleepUntil(ctx, time.Since(h.began)+f.Down); err != nil {
			return err
		}
		if err := cc.Resume(ctx, node); err != nil {
			return err
		}
		h.cl.paused = nil
	} else {
		h.cl.down = victims
		for _, n := range victims {
			if err := cc.Kill(ctx, n); err != nil {
				return err
			}
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+f.Down); err != nil {
			return err
		}
		if err := cc.Restart(ctx, victims...); err != nil {
			return err
		}
		h.cl.down = nil
		h.res.BrokerRestarts += len(victims)
	}
	h.logger.Info("eos: brokers back", "brokers", victims, "at", h.elapsed())
	return h.waitClusterHealed(ctx)
}

// clusterHealTimeout bounds waitClusterHealed.
const clusterHealTimeout = 2 * time.Minute

// waitClusterHealed waits until every partition of the cluster (the run's topics, the
// offsets topic, the transaction state log) has a leader and all its replicas in sync,
// so that the next fault starts from a whole cluster. It only logs when that takes
// longer than clusterHealTimeout: the application must cope with a cluster that has
// not healed, too.
func (h *harness) waitClusterHealed(ctx context.Context) error {
	start := time.Now()
	client, err := h.clusterClient()
	if err != nil {
		return err
	}
	for {
		lagging, err := underReplicated(client, len(h.cfg.Cluster.Nodes()))
		if err == nil && lagging == "" {
			h.logger.Info("eos: cluster healed", "took", time.Since(start).Round(time.Millisecond), "at", h.elapsed())
			return nil
		}
		if time.Since(start) > clusterHealTimeout {
			h.logger.Warn("eos: the cluster has not healed; going on", "after", clusterHealTimeout, "lagging", lagging, "error", err)
			return nil
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+500*time.Millisecond); err != nil {
			return err
		}
	}
}

// underReplicated names a partition without a leader or with replicas out of sync
// ("" when there is none), or a broker missing from the cluster of brokers, as any
// broker sees it: each broker is asked for its own
// metadata, because a broker that was paused answers from its stale cache for a moment
// after it resumes (it showed every replica in sync 13 ms after a pause of 8.6 s that
// had fenced it).
func underReplicated(client sarama.Client, brokers int) (string, error) {
	if err := client.RefreshMetadata(); err != nil {
		return "", err
	}
	for _, b := range client.Brokers() {
		if ok, _ := b.Connected(); !ok {
			if err := b.Open(client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
				return "", err
			}
		}
		md, err := b.GetMetadata(sarama.NewMetadataRequest(client.Config().Version, nil))
		if err != nil {
			return "", fmt.Errorf("metadata from broker %d: %w", b.ID(), err)
		}
		if len(md.Brokers) < brokers {
			return fmt.Sprintf("broker %d knows %d brokers", b.ID(), len(md.Brokers)), nil
		}
		for _, t := range md.Topics {
			if !errors.Is(t.Err, sarama.ErrNoError) {
				return fmt.Sprintf("broker %d: topic %s: %v", b.ID(), t.Name, t.Err), nil
			}
			for _, p := range t.Partitions {
				if p.Leader < 0 || (!errors.Is(p.Err, sarama.ErrNoError) && !errors.Is(p.Err, sarama.ErrReplicaNotAvailable)) {
					return fmt.Sprintf("broker %d: %s/%d: leader %d, %v", b.ID(), t.Name, p.ID, p.Leader, p.Err), nil
				}
				if len(p.Isr) < len(p.Replicas) {
					return fmt.Sprintf("broker %d: %s/%d: in sync %v of %v", b.ID(), t.Name, p.ID, p.Isr, p.Replicas), nil
				}
			}
		}
	}
	return "", nil
}

// checkReplication reports, as anomalies, the application's internal topics (and the
// offsets topic and transaction state log) with fewer replicas than the cluster's
// nodes: eddy must create its topics with the replication factor it was given.
func (h *harness) checkReplication() {
	client, err := h.clusterClient()
	if err != nil {
		h.anomaly("replication check: %v", err)
		return
	}
	if err := client.RefreshMetadata(); err != nil {
		h.anomaly("replication check: %v", err)
		return
	}
	topics, err := client.Topics()
	if err != nil {
		h.anomaly("replication check: %v", err)
		return
	}
	want := len(h.cfg.Cluster.Nodes())
	checked := 0
	for _, t := range topics {
		if !strings.HasPrefix(t, h.names.App+"-") && t != "__consumer_offsets" && t != "__transaction_state" {
			continue
		}
		checked++
		replicas, err := client.Replicas(t, 0)
		if err != nil {
			h.anomaly("replication check: %s: %v", t, err)
			continue
		}
		if len(replicas) != want {
			h.anomaly("topic %s has %d replicas, want %d (the cluster's brokers)", t, len(replicas), want)
		}
		if strings.HasPrefix(t, h.names.App+"-") {
			h.checkTopicConfigs(client, t)
		}
	}
	h.logger.Info("eos: replication checked", "topics", checked, "replicas", want)
	if checked < 3 {
		h.anomaly("replication check: only %d internal topics found", checked)
	}
}

// checkTopicConfigs reports, as an anomaly, an internal topic that lacks one of
// Config.InternalTopicConfigs as a topic config of its own.
func (h *harness) checkTopicConfigs(client sarama.Client, topic string) {
	if len(h.cfg.InternalTopicConfigs) == 0 {
		return
	}
	// Not closed: closing a ClusterAdmin closes its client, which the harness keeps.
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		h.anomaly("topic configs of %s: %v", topic, err)
		return
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		h.anomaly("topic configs of %s: %v", topic, err)
		return
	}
	for k, want := range h.cfg.InternalTopicConfigs {
		i := slices.IndexFunc(entries, func(e sarama.ConfigEntry) bool { return e.Name == k })
		switch {
		case i < 0:
			h.anomaly("internal topic %s: no config %s (want %q)", topic, k, want)
		case entries[i].Value != want || entries[i].Source != sarama.SourceTopic:
			h.anomaly("internal topic %s: config %s is %q from %v, want %q as a topic config", topic, k, entries[i].Value, entries[i].Source, want)
		}
	}
}

// healCluster brings back what the harness left killed or paused.
func (h *harness) healCluster() {
	if h.cfg.Cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range h.cl.paused {
		if err := h.cfg.Cluster.Resume(ctx, n); err != nil {
			h.logger.Error("eos: resuming a broker on the way out", "broker", n, "error", err)
		}
	}
	if len(h.cl.down) > 0 {
		if err := h.cfg.Cluster.Restart(ctx, h.cl.down...); err != nil {
			h.logger.Error("eos: restarting brokers on the way out", "brokers", h.cl.down, "error", err)
		}
	}
	if h.cl.client != nil {
		_ = h.cl.client.Close()
	}
}

// workerTransactionalID returns the transactional ID of worker 0 of an instance
// (eddy: <app>-<instance ID>-<worker>, the instance ID kept in its state dir).
func (h *harness) workerTransactionalID(target int) (string, error) {
	in := h.instances[target%len(h.instances)]
	path := filepath.Join(in.cfg.StateDir, h.names.App, eddy.InstanceIDFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("eos: the instance ID of %s: %w", in.cfg.StateDir, err)
	}
	return names.TransactionalID(h.names.App, strings.TrimSpace(string(b))+"-0"), nil
}
