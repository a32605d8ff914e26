package eddy

import (
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
		sc, err := cfg.saramaConfig()
		if err != nil {
			t.Fatal(err)
		}
		if sc.Net.ReadTimeout < sc.Consumer.Group.Rebalance.Timeout+5*time.Second {
			t.Errorf("Net.ReadTimeout %v is below the rebalance timeout %v + 5s", sc.Net.ReadTimeout, sc.Consumer.Group.Rebalance.Timeout)
		}
	}
}
