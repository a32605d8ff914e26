package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// wantOutput is the command's output on the sample input, computed by hand (see
// topology_test.go for the updates behind it).
const wantOutput = `Totals per customer (store customer-totals):
c1	60.00
c2	10.00
c3	115.75
c4	20.00

Enriched orders (shop-orders-enriched):
o1	c1	12.50	Ada Lovelace	London
o2	c2	8.99	Alan Turing	Manchester
o3	c1	45.00	Ada Lovelace	London
o4	c4	20.00	(unknown customer)	-
o5	c3	15.75	Grace Hopper	New York
o6	c2	1.01	Alan Turing	Manchester
o7	c1	2.50	Ada Lovelace	Cambridge
o8	c3	100.00	Grace Hopper	New York

Orders per minute (shop-orders-per-minute):
2026-12-01T10:00	3
2026-12-01T10:01	3
2026-12-01T10:02	2
`

// The command on the embedded broker: the one run of `go run ./examples/shop`, with
// one partition and with several (the re-keyed orders then cross partitions).
func TestSampleOnTheEmbeddedBroker(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		var out bytes.Buffer
		if err := run(context.Background(), options{partitions: partitions, timeout: time.Minute}, &out); err != nil {
			t.Fatalf("%d partitions: %v", partitions, err)
		}
		if out.String() != wantOutput {
			t.Errorf("%d partitions: output\n%s\nwant\n%s", partitions, out.String(), wantOutput)
		}
	}
}

func TestBadFlags(t *testing.T) {
	if err := run(context.Background(), options{partitions: 0}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-partitions") {
		t.Errorf("partitions 0: %v", err)
	}
	if err := run(context.Background(), options{partitions: 1, timeout: time.Millisecond}, &bytes.Buffer{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("-timeout 1ms: %v", err)
	}
}

func TestCents(t *testing.T) {
	for n, want := range map[int64]string{0: "0.00", 5: "0.05", 1250: "12.50", -101: "-1.01", 11575: "115.75"} {
		if got := cents(n); got != want {
			t.Errorf("cents(%d) = %q, want %q", n, got, want)
		}
	}
}
