package eddy

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy/internal/metrics"
)

// registerMetrics registers the runtime's metrics with Config.Metrics, if set.
func (rt *runtime) registerMetrics() error {
	if rt.cfg.Metrics == nil {
		return nil
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"application_id": rt.cfg.ApplicationID}, rt.cfg.Metrics)
	m, err := metrics.New(reg, rt.snapshot)
	if err != nil {
		return fmt.Errorf("eddy: register metrics: %w", err)
	}
	rt.metrics = m
	return nil
}

// snapshot reports states and levels to the metrics at scrape time.
func (rt *runtime) snapshot() metrics.Snapshot {
	s := metrics.Snapshot{AppState: string(rt.app.State()), States: allStates, TaskStates: map[string]int{}}
	for st := taskCreated; st < taskClosed; st++ {
		s.TaskStates[st.String()] = 0
	}
	for _, t := range rt.registry.all() {
		st := taskState(t.state.Load())
		if st == taskClosed {
			continue
		}
		s.TaskStates[st.String()]++
		if st == taskRunning {
			for topic, lag := range t.inbox.lag() {
				s.Lag = append(s.Lag, metrics.PartitionLag{Topic: topic, Partition: t.id.Partition, Lag: lag})
			}
		}
		if levels := t.bufferKeys.Load(); levels != nil {
			for store, n := range *levels {
				s.BufferKeys = append(s.BufferKeys, metrics.StoreLevel{Task: t.id.String(), Store: store, Value: float64(n)})
			}
		}
	}
	sbs := rt.standbyInfos()
	warm := rt.assignor.warmups()
	s.TaskStates["standby"], s.TaskStates["warm-up"] = 0, 0
	for _, sb := range sbs {
		if warm[sb.ID] {
			s.TaskStates["warm-up"]++
		} else {
			s.TaskStates["standby"]++
		}
	}
	for _, sb := range sbs {
		for store, lag := range sb.Lag {
			s.StandbyLag = append(s.StandbyLag, metrics.StoreLevel{Task: sb.ID.String(), Store: store, Value: float64(lag)})
		}
		if !sb.CaughtUp.IsZero() {
			s.StandbyAge = append(s.StandbyAge, metrics.StoreLevel{Task: sb.ID.String(), Value: time.Since(sb.CaughtUp).Seconds()})
		}
	}
	return s
}
