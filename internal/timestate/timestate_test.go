package timestate_test

import (
	"context"
	"testing"

	"github.com/eddy-streams/eddy/internal/timestate"
)

func TestCellsRollBackToTheirCommittedValue(t *testing.T) {
	r := &timestate.Registry{}
	ctx := timestate.WithRegistry(context.Background(), r)
	if timestate.From(ctx) != r || timestate.From(context.Background()) != nil {
		t.Fatal("From does not give the registry of the context")
	}
	a, b := r.New(-1), r.New(5)
	a.Set(10)
	r.Committed()
	a.Set(20)
	b.Set(30)
	r.Late()
	r.Rollback()
	if a.Get() != 10 || b.Get() != 5 {
		t.Fatalf("after rollback: %d %d, want 10 5", a.Get(), b.Get())
	}
	// The late count only grows: a counter.
	r.Late()
	if r.LateCount() != 2 {
		t.Fatalf("late count %d, want 2", r.LateCount())
	}
	var none *timestate.Registry
	c := none.New(3)
	none.Late()
	if c.Get() != 3 || none.LateCount() != 0 {
		t.Fatal("a nil registry's cells and count misbehave")
	}
}

// A sealed transaction's values are what the next Committed commits; the values since
// stay current. A rollback returns past the seal to the last committed values.
func TestCellsAcrossASeal(t *testing.T) {
	r := &timestate.Registry{}
	a := r.New(0)
	a.Set(10)
	r.Seal() // the transaction at 10 commits while processing goes on
	a.Set(20)
	r.Committed()
	if a.Get() != 20 {
		t.Fatalf("Committed after a seal changed the current value: %d, want 20", a.Get())
	}
	r.Rollback() // the open transaction at 20 aborted
	if a.Get() != 10 {
		t.Fatalf("after the sealed transaction committed and the open one aborted: %d, want 10", a.Get())
	}
	a.Set(30)
	r.Seal()
	a.Set(40)
	r.Rollback() // the sealed transaction aborted: both go
	if a.Get() != 10 {
		t.Fatalf("after a rollback while sealed: %d, want 10", a.Get())
	}
	a.Set(50)
	r.Committed() // no seal: the current value commits
	a.Set(60)
	r.Rollback()
	if a.Get() != 50 {
		t.Fatalf("after a commit without a seal: %d, want 50", a.Get())
	}
}
