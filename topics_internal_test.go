package eddy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/topicspec"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// rekeyTopology: "in" → re-key → repartition "rekeyed" (partitions: 0 = default) →
// count (store "counts") → "out"; with join, the counting sub-topology also reads the
// user topic "side".
func rekeyTopology(t *testing.T, partitions int32, join bool) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "in")
	r := topology.AddRepartition(b, "rekeyed", serde.String(), serde.String(), "in")
	if partitions != 0 {
		r.WithPartitions(partitions)
	}
	parents := []string{"rekeyed"}
	if join {
		topology.AddSource(b, "side", serde.String(), serde.String(), "side")
		parents = append(parents, "side")
	}
	topology.AddProcessor(b, "count", processor.MapValues[string](func(v string) (string, error) { return v, nil }), parents...)
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.String(), "count")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "count")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func specCounts(t *testing.T, topo *topology.Topology, counts map[string]int32) (map[string]int32, error) {
	t.Helper()
	specs, err := planInternalTopics(topo, "app", counts)
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	var names []string
	for _, s := range specs {
		out[s.Name] = s.Partitions
		names = append(names, s.Name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("specs not sorted by name: %v", names)
	}
	return out, nil
}

// Internal topics are sized as Kafka Streams sizes them, with no broker: changelogs and
// the offsets record one partition per task; a repartition topic by WithPartitions, else
// by the other sources of the sub-topology that reads it, else by the writer's tasks.
func TestPlanInternalTopics(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int32
		join       bool
		counts     map[string]int32
		want       map[string]int32
		wantErr    string
	}{
		{name: "sized by the writer", counts: map[string]int32{"in": 6, "out": 1},
			want: map[string]int32{"app-rekeyed-repartition": 6, "app-counts-changelog": 6, "app-eddy-offsets-0-changelog": 6, "app-eddy-offsets-1-changelog": 6}},
		{name: "WithPartitions", partitions: 3, counts: map[string]int32{"in": 6, "out": 1},
			want: map[string]int32{"app-rekeyed-repartition": 3, "app-counts-changelog": 3, "app-eddy-offsets-0-changelog": 6, "app-eddy-offsets-1-changelog": 3}},
		{name: "sized by the reader's user source", join: true, counts: map[string]int32{"in": 6, "side": 2, "out": 1},
			want: map[string]int32{"app-rekeyed-repartition": 2, "app-counts-changelog": 2, "app-eddy-offsets-0-changelog": 6, "app-eddy-offsets-1-changelog": 2}},
		{name: "WithPartitions against the reader's user source", partitions: 3, join: true, counts: map[string]int32{"in": 6, "side": 2, "out": 1},
			wantErr: "reads repartition topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := specCounts(t, rekeyTopology(t, tc.partitions, tc.join), tc.counts)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrPartitionMismatch) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want ErrPartitionMismatch mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("planned %v, want %v", got, tc.want)
			}
		})
	}
}

// User source topics of one sub-topology must be co-partitioned.
func TestPlanInternalTopicsRefusesUnequalSources(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "a", serde.String(), serde.String(), "a")
	topology.AddSource(b, "b", serde.String(), serde.String(), "b")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "a", "b")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = planInternalTopics(topo, "app", map[string]int32{"a": 4, "b": 2, "out": 1})
	if !errors.Is(err, ErrPartitionMismatch) || !strings.Contains(err.Error(), `"a" (4 partitions)`) {
		t.Fatalf("err = %v; want ErrPartitionMismatch naming a and its count", err)
	}
}

// An internal topic is created with the configured replication factor, the user's
// InternalTopicConfigs (min.insync.replicas for a production cluster) and its own
// configs.
func TestInternalTopicDetail(t *testing.T) {
	cfg, err := Config{
		ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: 3,
		InternalTopicConfigs: map[string]string{"min.insync.replicas": "2", "compression.type": "lz4"},
	}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	spec := topicspec.Changelog("app", "counts", 4)
	d := internalTopicDetail(spec, cfg)
	if d.NumPartitions != 4 || d.ReplicationFactor != 3 {
		t.Errorf("partitions %d, replication factor %d; want 4 and 3", d.NumPartitions, d.ReplicationFactor)
	}
	got := map[string]string{}
	for k, v := range d.ConfigEntries {
		got[k] = *v
	}
	want := map[string]string{"min.insync.replicas": "2", "compression.type": "lz4", "cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1"}
	if !maps.Equal(got, want) {
		t.Errorf("configs %v, want %v", got, want)
	}
	// The default leaves the replication factor to the broker.
	cfg, err = Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if d := internalTopicDetail(spec, cfg); d.ReplicationFactor != -1 || len(d.ConfigEntries) != len(spec.Configs) {
		t.Errorf("default: replication factor %d, %d configs; want -1 and the spec's %d", d.ReplicationFactor, len(d.ConfigEntries), len(spec.Configs))
	}
}

// unawareClient is a sarama.Client whose metadata refreshes answer, the first
// unknownFor times, that a topic does not exist: a broker of a cluster that has not yet
// learned of a topic the controller created.
type unawareClient struct {
	sarama.Client
	unknownFor, calls int
}

func (c *unawareClient) RefreshMetadata(topics ...string) error {
	c.calls++
	if c.calls <= c.unknownFor {
		return fmt.Errorf("%s: %w", topics[0], sarama.ErrUnknownTopicOrPartition)
	}
	return nil
}

// On three-node Kafka 4.1.1 an instance stopped with "<app>-sum-changelog: Request was
// for a topic or partition that does not exist on this broker" right after it created
// its internal topics: the broker its client asked had not yet learned of them, and
// sarama's own retries (3, 250 ms apart) had passed. The refresh after creating must
// wait for the broker to learn of them, and give up only on another error.
func TestRefreshCreatedWaitsForTheBrokerToKnowTheTopics(t *testing.T) {
	c := &unawareClient{unknownFor: 5}
	if err := refreshCreated(context.Background(), c, []string{"app-sum-changelog"}); err != nil {
		t.Fatalf("refresh: %v after %d calls; want it to wait until the broker knows the topic", err, c.calls)
	}
	if c.calls != 6 {
		t.Errorf("%d refreshes, want 6", c.calls)
	}
	other := &failingClient{err: sarama.ErrTopicAuthorizationFailed}
	if err := refreshCreated(context.Background(), other, []string{"t"}); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) || other.calls != 1 {
		t.Errorf("another error: %v after %d calls, want it at once", err, other.calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := refreshCreated(ctx, &unawareClient{unknownFor: 1 << 30}, []string{"t"}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}

type failingClient struct {
	sarama.Client
	err   error
	calls int
}

func (c *failingClient) RefreshMetadata(...string) error {
	c.calls++
	return c.err
}

// Created internal topics may take long to show in the metadata when they have many
// partitions (4 topics of 1,000 partitions took more than the 10 s that the former 40
// attempts allowed, on one broker: BENCHMARKS.md "Scale"). The wait is bounded by time,
// not by a count of attempts; it checks the partition counts, and ends with the context.
func TestWaitVisibleWaitsForTheTimeNotAnAttemptCount(t *testing.T) {
	specs := []topicspec.Spec{{Name: "a", Partitions: 1000}, {Name: "b", Partitions: 1000}}
	created := []string{"a", "b"}
	calls := 0
	slow := func(_ context.Context, names []string) (map[string]int32, error) {
		calls++
		if calls <= 60 { // more than 40 attempts
			return map[string]int32{"a": 1000}, nil
		}
		return map[string]int32{"a": 1000, "b": 1000}, nil
	}
	if err := waitVisible(context.Background(), slow, created, specs, time.Minute, time.Microsecond); err != nil || calls != 61 {
		t.Fatalf("waitVisible: %v after %d calls, want the topics after 61", err, calls)
	}
	never := func(context.Context, []string) (map[string]int32, error) { return map[string]int32{"a": 1000}, nil }
	err := waitVisible(context.Background(), never, created, specs, 20*time.Millisecond, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 visible") {
		t.Errorf("never visible: %v, want an error naming what is missing", err)
	}
	wrong := func(context.Context, []string) (map[string]int32, error) {
		return map[string]int32{"a": 1000, "b": 8}, nil
	}
	if err := waitVisible(context.Background(), wrong, created, specs, time.Minute, time.Millisecond); !errors.Is(err, ErrPartitionMismatch) {
		t.Errorf("another instance's topic of 8 partitions: %v, want ErrPartitionMismatch", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitVisible(ctx, never, created, specs, time.Minute, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}
