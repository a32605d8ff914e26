package topologytest_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// Restart restores the stores from their changelogs: the sums go on from the totals
// before it, in memory and with bbolt files (restored after their checkpoint).
func TestRestartRestoresStoresFromChangelogs(t *testing.T) {
	for name, cfg := range map[string]topologytest.Config{
		"memory": {},
		"bbolt":  {StateDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			d := sums(t, cfg)
			in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
			out := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64())
			for _, v := range []int64{1, 2} {
				if err := in.Pipe("a", v); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
			if err := d.Restart(); err != nil { // twice: the second restores from its checkpoint
				t.Fatal(err)
			}
			if err := in.Pipe("a", 4); err != nil {
				t.Fatal(err)
			}
			if got, want := readAll(t, out), []string{"a=1", "a=3", "a=7"}; !slices.Equal(got, want) {
				t.Fatalf("totals %q, want %q", got, want)
			}
		})
	}
}

func TestRestartRefusesAnOpenTransaction(t *testing.T) {
	d := sums(t, topologytest.Config{CommitEvery: 10})
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	if err := in.Pipe("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); !errors.Is(err, topologytest.ErrOpenTransaction) {
		t.Fatalf("Restart with a record waiting for its commit: %v, want ErrOpenTransaction", err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
}
