package eddy_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// A global table on two instances: each reads all partitions of the global topic (a
// query on either answers for every key), each joins the clicks of its own partitions
// with users of every partition (no co-partitioning: 3 global partitions, 2 click
// partitions), updates while running reach both, no changelog topic is made for the
// global store, and a restart reads on from the store's checkpoints (a deletion made
// while the instance was down is seen).
func TestGlobalTableOnTwoInstances(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		users, clicks, out := c.Unique("g-users"), c.Unique("g-clicks"), c.Unique("g-out")
		for topic, n := range map[string]int32{users: 3, clicks: 2, out: 2} {
			if err := c.CreateTopic(ctx, topic, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		str := serde.String()
		const nUsers = 30
		var recs []processor.Record[string, string]
		for i := range nUsers {
			recs = append(recs, processor.Record[string, string]{Key: fmt.Sprintf("u%d", i), Value: fmt.Sprintf("name%d", i)})
		}
		if err := kafkatest.ProduceTyped(ctx, c, users, str, str, recs...); err != nil {
			t.Fatal(err)
		}

		const store = "users-global"
		b := stream.NewBuilder()
		g := stream.GlobalTableFrom(b, str, str, users, stream.Materialized(store))
		cs := stream.From(b, str, str, []string{clicks})
		stream.GlobalJoin(cs, g, func(_, user string) (string, bool) { return user, true },
			func(_, user, name string) string { return user + "=" + name }).To(out, str, str)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		appID := c.Unique("global")
		dirs := []string{t.TempDir(), t.TempDir()}
		cfg := func(i int) eddy.Config {
			return eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: dirs[i], Logger: testLogger(t)}
		}
		// Clicks waiting before the instances start: the global table is read in full
		// before any task starts (bootstrap), so every one of them joins.
		var cl []processor.Record[string, string]
		want := map[string]bool{}
		for i := range 20 {
			u := fmt.Sprintf("u%d", (i*7)%nUsers)
			cl = append(cl, processor.Record[string, string]{Key: fmt.Sprintf("c%d", i), Value: u})
			want[fmt.Sprintf("c%d:%s=name%d", i, u, (i*7)%nUsers)] = true
		}
		if err := kafkatest.ProduceTyped(ctx, c, clicks, str, str, cl[:10]...); err != nil {
			t.Fatal(err)
		}
		ins := []*instance{start(t, topo, cfg(0)), start(t, topo, cfg(1))}

		// get reads a user through instance in's global store; "" when absent.
		get := func(in *instance, user string) (string, error) {
			q, err := eddy.Query[string, string](in.app, store)
			if err != nil {
				return "", err
			}
			v, ok, err := q.Get(user)
			if errors.Is(err, eddy.ErrNotReady) {
				return "?", nil
			}
			if !ok {
				return "", err
			}
			return v, err
		}
		for i, in := range ins {
			waitFor(t, time.Minute, fmt.Sprintf("instance %d to hold every user", i), func() (bool, error) {
				if err, done := in.exited(); done {
					return false, fmt.Errorf("app stopped: %v", err)
				}
				for u := range nUsers {
					v, err := get(in, fmt.Sprintf("u%d", u))
					if err != nil || v != fmt.Sprintf("name%d", u) {
						return false, err
					}
				}
				return true, nil
			})
			q, err := eddy.Query[string, string](in.app, store)
			if err != nil {
				t.Fatal(err)
			}
			all, err := q.All()
			if err != nil || len(all) != nUsers {
				t.Fatalf("instance %d: All() gave %d users (%v), want %d", i, len(all), err, nUsers)
			}
		}

		// Clicks on both partitions join users of every global partition.
		if err := kafkatest.ProduceTyped(ctx, c, clicks, str, str, cl[10:]...); err != nil {
			t.Fatal(err)
		}
		outputs := func() map[string]bool {
			recs, err := kafkatest.ReadCommittedTyped(ctx, c, out, str, str)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, r := range recs {
				got[r.Key+":"+r.Value] = true
			}
			return got
		}
		waitFor(t, time.Minute, "the joined clicks", func() (bool, error) { return len(outputs()) >= len(want), nil })
		for k := range outputs() {
			if !want[k] {
				t.Errorf("unexpected output %s", k)
			}
		}
		if got := outputs(); len(got) != len(want) {
			t.Errorf("%d outputs, want %d", len(got), len(want))
		}

		// An update while running reaches both instances.
		if err := kafkatest.ProduceTyped(ctx, c, users, str, str, processor.Record[string, string]{Key: "u0", Value: "renamed"}); err != nil {
			t.Fatal(err)
		}
		for i, in := range ins {
			waitFor(t, time.Minute, fmt.Sprintf("instance %d to see the update", i), func() (bool, error) {
				v, err := get(in, "u0")
				return v == "renamed", err
			})
		}

		// No changelog topic for the global store: its topic is its changelog.
		admin, err := sarama.NewClusterAdmin(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		for name := range topics {
			if strings.HasPrefix(name, appID) && strings.Contains(name, store) {
				t.Errorf("topic %q was made for the global store", name)
			}
		}

		for _, in := range ins {
			if err := in.stop(); err != nil {
				t.Fatal(err)
			}
		}
		// While down: u1 deleted. A restart reads on from its checkpoints.
		if err := kafkatest.ProduceTyped(ctx, c, users, str, serde.Nullable(str), processor.Record[string, *string]{Key: "u1"}); err != nil {
			t.Fatal(err)
		}
		in := start(t, topo, cfg(0))
		waitFor(t, time.Minute, "the restarted instance to see the deletion", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			v, err := get(in, "u1")
			return v == "", err
		})
		for _, u := range []string{"u0", "u2"} {
			if v, err := get(in, u); err != nil || !slices.Contains([]string{"renamed", "name2"}, v) {
				t.Errorf("after the restart %s = %q (%v)", u, v, err)
			}
		}
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
