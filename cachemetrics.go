package eddy

import "github.com/eddy-streams/eddy/internal/cache"

type cacheStats = cache.Stats

// reportCaches adds what the task's record caches did since the last commit to the
// metrics (eddy_record_cache_*_total). The counters belong to the task's goroutine,
// which calls this at every commit.
func (t *taskRunner) reportCaches() {
	if !t.metrics.Exported() || t.eng == nil {
		return
	}
	t.eng.Caches().TakeStats(func(store string, s cacheStats) {
		t.metrics.CacheStats(store, s.Hits, s.Misses, s.Evictions, s.Flushes)
	})
}
