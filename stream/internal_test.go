package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// A response whose hash is not that of the left table's current value is stale and
// dropped; one with the current hash joins. The driver processes each input to the end,
// so a stale response is forged here on the response topic.
func TestForeignKeyJoinDropsStaleResponses(t *testing.T) {
	str := serde.String()
	b := NewBuilder()
	orders := TableFrom(b, str, str, "orders")
	products := TableFrom(b, str, str, "products")
	j := ForeignKeyJoin(orders, products, func(o string) string { p, _, _ := strings.Cut(o, ":"); return p },
		func(o, p string) string { return o + "/" + p }, nil)
	ToStream(j).To("out", str, serde.Nullable(str))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var respTopic string
	for _, st := range topo.Subtopologies() {
		for _, r := range st.Repartitions {
			if strings.Contains(r, "RESPONSE") {
				respTopic = "topologytest-" + r + "-repartition"
			}
		}
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ts := time.Unix(100, 0)
	if err := d.PipeRaw("orders", []byte("o1"), []byte("p1:2"), nil, ts); err != nil {
		t.Fatal(err)
	}
	rs := responseSerde(str)
	send := func(leftValue, foreign string) {
		t.Helper()
		f := foreign
		vb, err := rs.Serialize("", response[string]{hash: valueHash([]byte(leftValue)), foreign: &f})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.PipeRaw(respTopic, []byte("o1"), vb, nil, ts); err != nil {
			t.Fatal(err)
		}
	}
	send("p1:1", "stale")
	if got := d.Records("out"); len(got) != 0 {
		t.Fatalf("a stale response joined: %q", got[0].Value)
	}
	send("p1:2", "Pen")
	if got := d.Records("out"); len(got) != 1 || string(got[0].Value) != "p1:2/Pen" {
		t.Fatalf("current response: out = %v", got)
	}
}
