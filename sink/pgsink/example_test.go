package pgsink_test

import (
	"context"
	"log"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/sink/pgsink"
	"github.com/eddy-streams/eddy/topology"
)

// A running total per customer, delivered exactly-once into PostgreSQL:
//
//	CREATE TABLE totals (customer text PRIMARY KEY, total bigint NOT NULL);
//
// and the server's max_prepared_transactions set above 0.
func ExampleNewTwoPhase() {
	ctx := context.Background()
	pool, err := pgsink.Connect(ctx, "postgres://eddy@127.0.0.1:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	totals, err := pgsink.NewTwoPhase(ctx, pool, pgsink.Table[string, int64]{
		Name:    "totals",
		Columns: []string{"customer", "total"},
		Key:     []string{"customer"},
		Row: func(r sink.Record[string, int64]) ([]any, error) {
			return []any{r.Key, r.Value}, nil
		},
	}, pgsink.Options{})
	if err != nil {
		log.Fatal(err) // e.g. max_prepared_transactions = 0, or no table "totals"
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "totals-in", serde.String(), serde.Int64(), "customer-totals")
	topology.AddSinkTo(b, "totals-db", totals, "totals-in")
	// … build b and run it with eddy.Config{Guarantee: eddy.ExactlyOnce}.
}

// Idempotent upserts: the table keeps the source partition and offset of each row.
//
//	CREATE TABLE totals (customer text PRIMARY KEY, total bigint NOT NULL,
//	    eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL);
func ExampleNewUpsert() {
	ctx := context.Background()
	pool, err := pgsink.Connect(ctx, "postgres://eddy@127.0.0.1:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	totals, err := pgsink.NewUpsert(ctx, pool, pgsink.Table[string, int64]{
		Name: "totals", Columns: []string{"customer", "total"}, Key: []string{"customer"},
		Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
	}, pgsink.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_ = totals // topology.AddSinkTo(b, "totals-db", totals, parents...)
}

// The write-ahead pipe: copy a topic into a table, starting from the offsets stored in
// PostgreSQL; it runs until its context ends.
func ExampleNewPipe() {
	ctx := context.Background()
	pool, err := pgsink.Connect(ctx, "postgres://eddy@127.0.0.1:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	pipe, err := pgsink.NewPipe(ctx, pgsink.PipeConfig[string, int64]{
		App: "totals-pipe", Brokers: []string{"127.0.0.1:9092"}, Topic: "customer-totals",
		Key: serde.String(), Value: serde.Int64(), Pool: pool,
		Table: pgsink.Table[string, int64]{
			Name: "totals", Columns: []string{"customer", "total"}, Key: []string{"customer"},
			Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := pipe.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
