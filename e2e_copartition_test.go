package eddy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// A DSL stream–table join over topics with different partition counts fails at start,
// and the error names both topics and their counts.
func TestJoinOfTopicsNotCopartitionedFailsAtStart(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := ctxT(t)
	clicks, users, out := c.Unique("clicks"), c.Unique("users"), c.Unique("out")
	for topic, n := range map[string]int32{clicks: 4, users: 2, out: 1} {
		if err := c.CreateTopic(ctx, topic, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := stream.NewBuilder()
	s := stream.From(b, serde.String(), serde.String(), []string{clicks})
	u := stream.TableFrom(b, serde.String(), serde.String(), users)
	stream.Join(s, u, func(c, u string) string { return c + "@" + u }).To(out, serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: c.Unique("app"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Run(context.Background())
	if !errors.Is(err, eddy.ErrPartitionMismatch) {
		t.Fatalf("Run: %v; want ErrPartitionMismatch", err)
	}
	for _, want := range []string{clicks, users, "4 partitions", "2", "joined by key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}
