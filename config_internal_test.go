package eddy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestJoinGroupOutlivesTheRebalanceTimeout: sarama's read timeout must cover a JoinGroup
// that the broker holds for the whole rebalance timeout, whatever the hook sets.
func TestJoinGroupOutlivesTheRebalanceTimeout(t *testing.T) {
	for _, hook := range []func(*sarama.Config){
		nil,
		func(c *sarama.Config) { c.Consumer.Group.Rebalance.Timeout = 2 * time.Minute },
		func(c *sarama.Config) { c.Net.ReadTimeout = 5 * time.Second },
	} {
		cfg, err := Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, Sarama: hook}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		sc, _, err := cfg.saramaConfig()
		if err != nil {
			t.Fatal(err)
		}
		if sc.Net.ReadTimeout < sc.Consumer.Group.Rebalance.Timeout+5*time.Second {
			t.Errorf("Net.ReadTimeout %v is below the rebalance timeout %v + 5s", sc.Net.ReadTimeout, sc.Consumer.Group.Rebalance.Timeout)
		}
	}
}

// The fetch budget's share per partition stays within sarama's default above and 16 KiB
// below.
func TestFetchSizeBounds(t *testing.T) {
	for _, tc := range []struct {
		partitions int
		want       int32
	}{{0, 1 << 20}, {1, 1 << 20}, {4, 1 << 20}, {16, 256 << 10}, {128, 32 << 10}, {256, 16 << 10}, {5000, 16 << 10}} {
		if got := fetchSize(tc.partitions); got != tc.want {
			t.Errorf("fetchSize(%d) = %d, want %d", tc.partitions, got, tc.want)
		}
	}
}

// TaskTimeout defaults to Kafka Streams' task.timeout.ms, 5 min.
func TestTaskTimeoutDefault(t *testing.T) {
	cfg, err := Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TaskTimeout != 5*time.Minute {
		t.Errorf("default TaskTimeout %v, want 5m", cfg.TaskTimeout)
	}
}

// TestInstanceIDIsTheGroupInstanceID: Config.InstanceID becomes sarama's group instance
// ID, whatever the hook sets; Kafka's own limits on it are checked at New; and a valid
// one is accepted up to Kafka's 249 characters.
func TestInstanceIDIsTheGroupInstanceID(t *testing.T) {
	for _, tc := range []struct {
		id, hook string
	}{{"orders-0", ""}, {"orders-0", "other"}, {"", "other"}, {strings.Repeat("a", 249), ""}, {"a.b_c-D9", ""}} {
		cfg, err := Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, InstanceID: tc.id,
			Sarama: func(c *sarama.Config) { c.Consumer.Group.InstanceId = tc.hook }}.withDefaults()
		if err != nil {
			t.Fatalf("InstanceID %q: %v", tc.id, err)
		}
		sc, _, err := cfg.saramaConfig()
		if err != nil {
			t.Fatal(err)
		}
		if sc.Consumer.Group.InstanceId != tc.id {
			t.Errorf("InstanceID %q with the hook setting %q: sarama's group instance ID is %q", tc.id, tc.hook, sc.Consumer.Group.InstanceId)
		}
	}
	for _, id := range []string{"pod 0", "pod/0", ".", "..", strings.Repeat("a", 250), "pöd"} {
		_, err := Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, InstanceID: id}.withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "InstanceID") {
			t.Errorf("InstanceID %q: got %v, want an ErrConfig naming InstanceID", id, err)
		}
	}
}
