package pgsink

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/sink"
)

// BenchmarkBatch compares the ways to write a batch of 1000 rows (k text, n bigint) in
// one transaction: COPY, one multi-row INSERT … VALUES, and one INSERT … SELECT FROM
// unnest(arrays) (what the targets use for keyed tables); and, for keyed tables, the
// upsert as VALUES, as unnest, and as COPY into a temporary table then INSERT … SELECT
// from it. Reported as rows/s.
//
//	EDDY_TEST_POSTGRES=$(integration/postgres.sh dsn) go test -run '^$' -bench Batch -benchtime 200x ./sink/pgsink
func BenchmarkBatch(b *testing.B) {
	const rowsPer = 1000
	ctx := context.Background()
	pool := pgtest.Pool(b)
	keys := make([]string, rowsPer)
	ns := make([]int64, rowsPer)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%06d", i)
		ns[i] = int64(i)
	}
	values := func(upsert bool) (string, []any) {
		var sb strings.Builder
		args := make([]any, 0, 2*rowsPer)
		for i := range keys {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "($%d,$%d)", 2*i+1, 2*i+2)
			args = append(args, keys[i], ns[i])
		}
		q := "INSERT INTO %s (k, n) VALUES " + sb.String()
		if upsert {
			q += " ON CONFLICT (k) DO UPDATE SET n = EXCLUDED.n"
		}
		return q, args
	}
	cases := []struct {
		name  string
		keyed bool
		write func(tx pgx.Tx, table string) error
	}{
		{"append/copy", false, func(tx pgx.Tx, table string) error {
			src := make([][]any, rowsPer)
			for i := range src {
				src[i] = []any{keys[i], ns[i]}
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"k", "n"}, pgx.CopyFromRows(src))
			return err
		}},
		{"append/values", false, func(tx pgx.Tx, table string) error {
			q, args := values(false)
			_, err := tx.Exec(ctx, fmt.Sprintf(q, table), args...)
			return err
		}},
		{"append/unnest", false, func(tx pgx.Tx, table string) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (k, n) SELECT * FROM unnest($1::text[], $2::bigint[])", table), keys, ns)
			return err
		}},
		{"upsert/values", true, func(tx pgx.Tx, table string) error {
			q, args := values(true)
			_, err := tx.Exec(ctx, fmt.Sprintf(q, table), args...)
			return err
		}},
		{"upsert/unnest", true, func(tx pgx.Tx, table string) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (k, n) SELECT * FROM unnest($1::text[], $2::bigint[]) ON CONFLICT (k) DO UPDATE SET n = EXCLUDED.n", table), keys, ns)
			return err
		}},
		// COPY into a temporary table, then the upsert from it (possible for NewUpsert,
		// whose transactions are not PREPAREd; not for NewTwoPhase).
		{"upsert/copytemp", true, func(tx pgx.Tx, table string) error {
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE stage (k text, n bigint) ON COMMIT DROP"); err != nil {
				return err
			}
			src := make([][]any, rowsPer)
			for i := range src {
				src[i] = []any{keys[i], ns[i]}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"stage"}, []string{"k", "n"}, pgx.CopyFromRows(src)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (k, n) SELECT k, n FROM stage ON CONFLICT (k) DO UPDATE SET n = EXCLUDED.n", table))
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			table := pgtest.Name(b, "bench")
			pk := ""
			if c.keyed {
				pk = " PRIMARY KEY"
			}
			pgtest.Exec(b, pool, fmt.Sprintf("CREATE TABLE %s (k text%s, n bigint)", table, pk))
			defer pgtest.Exec(b, pool, "DROP TABLE "+table)
			b.ResetTimer()
			for range b.N {
				tx, err := pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.write(tx, table); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*rowsPer)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// benchRecords are n records as the integration bench writes them: 16-byte keys,
// 100-byte values, their source partition and offset.
func benchRecords(n int) []sink.Record[[]byte, []byte] {
	recs := make([]sink.Record[[]byte, []byte], n)
	for i := range recs {
		k := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(i)*0x9E3779B97F4A7C15), uint64(i))
		recs[i] = sink.Record[[]byte, []byte]{Key: k, Value: make([]byte, 100), Topic: "in", Partition: int32(i % 8), Offset: int64(i)}
	}
	return recs
}

// benchTable is the upsert's table of the integration bench (k bytea primary key, v
// bytea, guarded by partition and offset), as openTable makes it, without a server.
func benchTable() *table[[]byte, []byte] {
	t := Table[[]byte, []byte]{
		Name: "bench", Columns: []string{"k", "v"}, Key: []string{"k"},
		Row:             func(r sink.Record[[]byte, []byte]) ([]any, error) { return []any{r.Key, r.Value}, nil },
		PartitionColumn: defaultPartitionColumn, OffsetColumn: defaultOffsetColumn,
	}
	return &table[[]byte, []byte]{Table: t, ident: identOf(t.Name), guarded: true, keyIdx: []int{0},
		all: []string{"k", "v", defaultPartitionColumn, defaultOffsetColumn}}
}

// BenchmarkRows is the client's part of writing a batch of 5000 records, no server:
// mapping them to rows (mapRow), and for the upsert keeping each key's last row
// (dedup), which runs on every batch. Reported per row.
//
//	go test -run '^$' -bench Rows ./sink/pgsink
func BenchmarkRows(b *testing.B) {
	const n = 5000
	recs := benchRecords(n)
	tb := benchTable()
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, r := range recs {
				if _, err := tb.mapRow(r); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
	rows := make([]row, n)
	for i, r := range recs {
		var err error
		if rows[i], err = tb.mapRow(r); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("dedup", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if got := tb.dedup(rows); len(got) != n {
				b.Fatalf("dedup kept %d of %d distinct keys", len(got), n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	})
}
