package restore_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/kafkatest"
)

// recreate deletes topic and creates it anew (a real broker deletes in the background:
// the create is retried until it is allowed).
func recreate(t *testing.T, c *kafkatest.Cluster, client sarama.Client, topic string) {
	t.Helper()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("recreate %s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := client.RefreshMetadata(topic); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreWipesAStoreOfAnEarlierChangelog: a store restored from a changelog that was
// then deleted and made anew, now holding more records than the store's checkpoint
// counts: the offsets fit, the topic ID does not. The restore must wipe the store and
// read the new changelog from its start (it used to read only the new tail, on top of
// the old topic's data). A store whose checkpoint was written before IDs were recorded
// is trusted as before, and gets the ID.
func TestRestoreWipesAStoreOfAnEarlierChangelog(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := context.Background()
		topic := c.Unique("store-changelog")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		old := writeChangelog(t, c, topic, 1, 3, nil)
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		settledEnd(t, client, topic)
		backend, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer backend.Close()
		r := &restore.Restorer{Client: client}
		res, err := r.Restore(ctx, backend, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameContent(t, storeContent(t, backend, "s"), old)
		if _, ok, err := backend.ChangelogID("s"); err != nil || !ok {
			t.Fatalf("the restore recorded no changelog ID (%v)", err)
		}
		t.Logf("first restore: %+v", res)

		recreate(t, c, client, topic)
		want := writeChangelog(t, c, topic, 2, 5, nil)
		end := settledEnd(t, client, topic)
		if cp, _, _ := backend.Checkpoint("s"); end <= cp {
			t.Fatalf("the new changelog ends at %d, not past the store's checkpoint %d", end, cp)
		}
		res, err = r.Restore(ctx, backend, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("restore after the changelog was made anew: %+v", res)
		if !res.Wiped || res.From != 0 || res.To != end {
			t.Errorf("restore of a store from an earlier changelog of the same name: from %d to %d wiped %v, want from 0 to %d wiped", res.From, res.To, res.Wiped, end)
		}
		sameContent(t, storeContent(t, backend, "s"), want)

		// A checkpoint with no ID (written before IDs were recorded) is trusted on
		// its offsets, and gets the changelog's ID.
		legacy, err := kvstore.OpenBolt(t.TempDir(), kvstore.BoltOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer legacy.Close()
		if err := legacy.Write(kvstore.Batch{Checkpoints: map[string]int64{"s": end}}); err != nil {
			t.Fatal(err)
		}
		res, err = r.Restore(ctx, legacy, "s", topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Wiped || res.From != end {
			t.Errorf("restore of a store without a recorded ID: %+v, want it kept at its checkpoint %d", res, end)
		}
		id, ok, err := legacy.ChangelogID("s")
		if want, _, _ := backend.ChangelogID("s"); err != nil || !ok || id != want {
			t.Errorf("after the restore the store without an ID has %x %v (%v), want the changelog's %x", id, ok, err, want)
		}
	})
}
