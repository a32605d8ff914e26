package sinktxn

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// memResolver is a resolver over a set of prepared IDs.
type memResolver struct{ prepared map[ID]bool }

func (m *memResolver) Pending(_ context.Context, prefix string) ([]ID, error) {
	var out []ID
	for id := range m.prepared {
		out = append(out, id)
	}
	return out, nil
}
func (m *memResolver) Commit(_ context.Context, id ID) error   { delete(m.prepared, id); return nil }
func (m *memResolver) Rollback(_ context.Context, id ID) error { delete(m.prepared, id); return nil }

type memTxn struct {
	m  *memResolver
	id ID
}

func (t memTxn) Prepare(context.Context) error { t.m.prepared[t.id] = true; return nil }
func (t memTxn) Discard(context.Context) error { return nil }

// The fault hook sees each step of the protocol where the harness kills an instance,
// in order, with the transaction concerned: after the prepare, after the Kafka
// commit, before the commit-prepared, and in a recovery before each resolution. (A
// hook call removed from a step fails this test; the exactly-once harness's PostgreSQL
// run also checks that an instance died at each step.)
func TestFaultHookSeesEveryStep(t *testing.T) {
	var seen []string
	SetFaultHook(func(s Step, id ID) { seen = append(seen, fmt.Sprintf("%s %x", s, id.Nonce)) })
	defer SetFaultHook(nil)
	m := &memResolver{prepared: map[ID]bool{}}
	r := NewRegistry("app", "0_1", []Node{{Name: "pg", Resolver: m, Guarantee: TwoPhase}})
	nonce := uint64(7)
	r.SetNonce(func() uint64 { return nonce })
	ctx := context.Background()
	open := func() {
		if _, err := r.Open("pg", func(id ID) (Open, error) { return memTxn{m, id}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	open()
	if err := r.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	r.Committed()
	if err := r.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	nonce = 8
	open()
	if err := r.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recover(ctx, 8); err != nil {
		t.Fatal(err)
	}
	want := []string{"prepared 7", "kafka-committed 7", "commit-prepared 7", "prepared 8", "recover 8"}
	if !slices.Equal(seen, want) {
		t.Fatalf("steps %q, want %q", seen, want)
	}
	if len(m.prepared) != 0 {
		t.Fatalf("left prepared: %v", m.prepared)
	}
}
