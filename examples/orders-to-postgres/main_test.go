package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/pgtest"
)

// The sample, computed by hand: c1 12.50 + 45.00 + 2.50, c2 8.99 + 1.01, c3 15.75 +
// 100.00; minute 10:00 has o1-o3, 10:01 o4-o5, 10:02 o6 (o7, at 10:04:50, closes them).
const wantOutput = `customer_totals:
c1	60.00
c2	10.00
c3	115.75

orders_per_minute (closed minutes):
2026-12-01T10:00	3
2026-12-01T10:01	2
2026-12-01T10:02	1

prepared transactions left: 0
`

// `go run ./examples/orders-to-postgres` against the test's PostgreSQL.
func TestSampleIntoPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	var out bytes.Buffer
	if err := run(context.Background(), dsn, 2*time.Minute, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != wantOutput {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), wantOutput)
	}
}
