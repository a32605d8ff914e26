package eddy

import (
	"slices"
	"testing"

	"github.com/eddy-streams/eddy/processor"
)

func ids(ts []*taskRunner) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.id.String())
	}
	slices.Sort(out)
	return out
}

// reconcile takes out what is no longer assigned (or stale), makes what is missing, and
// keeps the rest as they are.
func TestRegistryReconcile(t *testing.T) {
	r := newTaskRegistry()
	create := func(id processor.TaskID) *taskRunner { return &taskRunner{id: id} }
	tid := func(p int32) processor.TaskID { return processor.TaskID{Subtopology: 0, Partition: p} }
	closing, fresh := r.reconcile([]processor.TaskID{tid(0), tid(1)}, nil, create)
	if len(closing) != 0 || !slices.Equal(ids(fresh), []string{"0_0", "0_1"}) {
		t.Fatalf("first assignment: closing %v fresh %v", ids(closing), ids(fresh))
	}
	kept := r.get(tid(1))
	closing, fresh = r.reconcile([]processor.TaskID{tid(1), tid(2)}, nil, create)
	if !slices.Equal(ids(closing), []string{"0_0"}) || !slices.Equal(ids(fresh), []string{"0_2"}) || r.get(tid(1)) != kept {
		t.Fatalf("second assignment: closing %v fresh %v, 0_1 kept: %v", ids(closing), ids(fresh), r.get(tid(1)) == kept)
	}
	closing, fresh = r.reconcile([]processor.TaskID{tid(1), tid(2)}, func(t *taskRunner) bool { return t.id == tid(1) }, create)
	if !slices.Equal(ids(closing), []string{"0_1"}) || !slices.Equal(ids(fresh), []string{"0_1"}) || r.get(tid(1)) == kept {
		t.Fatalf("a stale task: closing %v fresh %v; want it replaced", ids(closing), ids(fresh))
	}
	if prev := r.newGeneration(5, map[string][]string{"h:1": {"0_1"}}); prev != 0 {
		t.Errorf("previous generation %d", prev)
	}
	if _, hosts := r.lookup(tid(1)); len(hosts["h:1"]) != 1 {
		t.Errorf("hosts %v", hosts)
	}
	if got := ids(r.takeAll()); !slices.Equal(got, []string{"0_1", "0_2"}) || len(r.all()) != 0 {
		t.Errorf("takeAll %v, left %d", got, len(r.all()))
	}
}
