package eddy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// TestTimeoutsTheBrokerRefusesStopTheApp: a transaction timeout above the broker's
// transaction.max.timeout.ms, or a session timeout outside its group session range, is
// refused the same at every attempt. Both were retried every 5 s for ever (issue 26: a
// warning per attempt, Run never returned); now Run fails at once naming the setting,
// the broker's limit and the way out. Kills the mutants "INVALID_TRANSACTION_TIMEOUT
// classified as an unknown outcome" and "INVALID_SESSION_TIMEOUT rejoined".
func TestTimeoutsTheBrokerRefusesStopTheApp(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		cases := []struct {
			name string
			want []string
		}{
			{"transaction timeout above the broker's maximum",
				[]string{"Config.TransactionTimeout 20m0s", "transaction.max.timeout.ms", "lower Config.TransactionTimeout"}},
			{"session timeout outside the broker's range",
				[]string{"session timeout 40m0s", "group.max.session.timeout.ms", "Config.Sarama"}},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newWordCount(t, c, 2)
				e.produce(t, 5)
				cfg := e.config(t)
				if i == 0 {
					cfg.TransactionTimeout = 20 * time.Minute
				} else {
					cfg.Sarama = func(sc *sarama.Config) { sc.Consumer.Group.Session.Timeout = 40 * time.Minute }
				}
				a := start(t, e.topo, cfg)
				var runErr error
				waitFor(t, time.Minute, "the application to stop", func() (bool, error) {
					err, done := a.exited()
					runErr = err
					return done, nil
				})
				t.Logf("Run: %v", runErr)
				if runErr == nil {
					t.Fatal("Run returned no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(runErr.Error(), w) {
						t.Errorf("the error does not say %q: %v", w, runErr)
					}
				}
			})
		}
	})
}
