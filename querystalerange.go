package eddy

import "github.com/eddy-streams/eddy/statestore"

// RangeStale is Range for a caller that accepts a stale answer (GetStale; Kafka
// Streams' enableStaleStores applies to range queries too): besides the tasks of the
// store running here it reads the standby replicas here and the tasks restoring (or
// suspended between sessions) here, each partition from one snapshot of its store
// file, and returns the pairs in key byte order with a StaleInfo per task read, in
// task order, saying its source, checkpoint and lag. A standby that has read nothing
// yet, or whose file a restore is rebuilding, is left out (as a plain Range leaves out
// partitions it does not hold); a task of this instance that cannot be read fails the
// query with ErrNotReady. Unlike Range it answers during a rebalance. It reads what GET
// /stores/{store}/keys?stale=true reads.
func (q *QueryableStore[K, V]) RangeStale(from, to K) ([]statestore.KeyValue[K, V], []StaleInfo, error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, nil, err
	}
	topic := rt.changelogTopic(q.store.Name)
	fb, err := q.keys.Serialize(topic, from)
	if err != nil {
		return nil, nil, err
	}
	tb, err := q.keys.Serialize(topic, to)
	if err != nil {
		return nil, nil, err
	}
	return q.scanStale(rt, fb, tb)
}

// AllStale is All for a caller that accepts a stale answer: every pair of the local
// copies of the store's partitions, as RangeStale.
func (q *QueryableStore[K, V]) AllStale() ([]statestore.KeyValue[K, V], []StaleInfo, error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, nil, err
	}
	return q.scanStale(rt, nil, nil)
}

func (q *QueryableStore[K, V]) scanStale(rt *runtime, from, to []byte) ([]statestore.KeyValue[K, V], []StaleInfo, error) {
	entries, infos, err := rt.queryScanStale(q.store, from, to)
	if err != nil {
		return nil, nil, err
	}
	out, err := q.decode(rt, entries)
	return out, infos, err
}
