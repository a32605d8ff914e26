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
