package eddy

// The group's tasks: a task is a partition of a sub-topology (its ID
// <subtopology>_<partition>), listed in the order every placement walks them.

import (
	"sort"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// tasksOf maps topic partitions to tasks.
func (a *assignor) tasksOf(topics map[string][]int32) []processor.TaskID {
	set := map[processor.TaskID]bool{}
	for topic, parts := range topics {
		sub, ok := a.topicToSub[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			set[processor.TaskID{Subtopology: sub, Partition: p}] = true
		}
	}
	return sortedTasks(set)
}

// sortedTasks orders tasks by partition, then sub-topology (compareTasks).
func sortedTasks(set map[processor.TaskID]bool) []processor.TaskID {
	out := make([]processor.TaskID, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Subtopology < out[j].Subtopology
	})
	return out
}

// compareTasks orders tasks as sortedTasks does: by partition, then sub-topology.
func compareTasks(a, b processor.TaskID) int {
	if a.Partition != b.Partition {
		return int(a.Partition) - int(b.Partition)
	}
	return a.Subtopology - b.Subtopology
}

// tasks lists the group's tasks, sorted: each sub-topology has as many as its source
// topics have partitions (the fewest, if they differ).
func (a *assignor) tasks(topics map[string][]int32) []processor.TaskID {
	all := map[processor.TaskID]bool{}
	for _, s := range a.graph.Subtopologies {
		n := -1
		for _, t := range s.AllSourceTopics(a.appID) {
			parts, ok := topics[t]
			if !ok {
				continue
			}
			if n < 0 || len(parts) < n {
				n = len(parts)
			}
		}
		for p := 0; p < n; p++ {
			all[processor.TaskID{Subtopology: s.ID, Partition: int32(p)}] = true
		}
	}
	return sortedTasks(all)
}

// standbyKeeps reports whether a standby replica keeps store st: persistent stores
// with a changelog of their own. An in-memory store is rebuilt at every start anyway,
// and a store whose changelog is its source topic is restored up to the task's
// committed input offset, which only the active task knows.
func standbyKeeps(st *graph.Store) bool {
	return st.Logged && !st.InMemory && st.SourceTopic == ""
}

// statefulTasks returns the tasks that have stores a standby keeps.
func (a *assignor) statefulTasks(tasks []processor.TaskID) []processor.TaskID {
	var out []processor.TaskID
	for _, t := range tasks {
		if a.stateful[t.Subtopology] {
			out = append(out, t)
		}
	}
	return out
}
