package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
)

// logTable is an append-only table (COPY): a record written twice shows as two rows.
func logTable(t *testing.T, pool *pgxpool.Pool) Table[string, string] {
	t.Helper()
	name := pgtest.Name(t, "log")
	pgtest.Exec(t, pool, fmt.Sprintf("CREATE TABLE %s (part integer NOT NULL, off bigint NOT NULL, k text, v text)", name))
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+name) })
	return Table[string, string]{
		Name: name, Columns: []string{"part", "off", "k", "v"},
		Row: func(r sink.Record[string, string]) ([]any, error) {
			return []any{r.Partition, r.Offset, r.Key, r.Value}, nil
		},
	}
}

// produceTxn writes msgs to topic in one transaction, committed or aborted.
func produceTxn(t *testing.T, c *kafkatest.Cluster, topic string, commit bool, msgs ...*sarama.ProducerMessage) {
	t.Helper()
	for _, m := range msgs {
		m.Topic = topic
	}
	if err := c.ProduceTxn(t.Context(), c.Unique("txn"), commit, msgs...); err != nil {
		t.Fatal(err)
	}
}

func msgs(part int32, from, n int, prefix string) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, n)
	for i := range out {
		out[i] = &sarama.ProducerMessage{Partition: part, Key: sarama.StringEncoder(fmt.Sprintf("k%d", from+i)), Value: sarama.StringEncoder(fmt.Sprintf("%s%d", prefix, from+i))}
	}
	return out
}

// logRows returns the table's rows as "part/off=v" with a count, and the number of rows
// written more than once.
func logRows(t *testing.T, pool *pgxpool.Pool, table string) (n int, dups int, aborted int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*), count(*) - count(DISTINCT (part, off)), count(*) FILTER (WHERE v LIKE 'aborted%%') FROM %s`, table)).Scan(&n, &dups, &aborted)
	if err != nil {
		t.Fatal(err)
	}
	return n, dups, aborted
}

// TestPipe (embedded broker and real Kafka): a pipe copies a topic's committed records
// into a table once each (an aborted transaction's records never), stops, and a new
// pipe goes on from the offsets stored in PostgreSQL: no record twice, none lost, and
// nothing committed to Kafka's group offsets. Kills the mutants "start from the log
// start" (Setup without MarkOffset/ResetOffset: the second run writes every record
// again) and "read_uncommitted" (the aborted records are written).
func TestPipe(t *testing.T) {
	pool := pgtest.Pool(t)
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		topic := c.Unique("pipe-in")
		if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		produceTxn(t, c, topic, true, append(msgs(0, 0, 30, "v"), msgs(1, 0, 20, "v")...)...)
		produceTxn(t, c, topic, false, msgs(0, 100, 5, "aborted")...)
		produceTxn(t, c, topic, true, msgs(0, 30, 10, "v")...)
		tbl := logTable(t, pool)
		app := c.Unique("pipe")
		run := func(want int) {
			t.Helper()
			p, err := NewPipe(ctx, PipeConfig[string, string]{
				App: app, Brokers: c.Addrs(), Topic: topic, Key: serde.String(), Value: serde.String(),
				Pool: pool, Table: tbl, BatchRecords: 7, BatchWait: 20 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- p.Run(rctx) }()
			for {
				n, _, _ := logRows(t, pool, tbl.Name)
				if n >= want {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("Run ended: %v", err)
				case <-ctx.Done():
					t.Fatalf("%d rows of %d after 60 s", n, want)
				case <-time.After(50 * time.Millisecond):
				}
			}
			// Some time for a wrong second write to show.
			time.Sleep(300 * time.Millisecond)
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			n, dups, aborted := logRows(t, pool, tbl.Name)
			if n != want || dups != 0 || aborted != 0 {
				t.Fatalf("%d rows (want %d), %d written twice, %d of the aborted transaction", n, want, dups, aborted)
			}
		}
		run(60)
		produceTxn(t, c, topic, true, append(msgs(0, 40, 6, "v"), msgs(1, 20, 4, "v")...)...)
		run(70)

		var stored map[int32]int64 = map[int32]int64{}
		r, err := pool.Query(ctx, "SELECT partition, next_offset FROM eddy_sink_offsets WHERE app = $1", app)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var p int32
			var o int64
			if err := r.Scan(&p, &o); err != nil {
				t.Fatal(err)
			}
			stored[p] = o
		}
		// Partition 0: 30 + 5 aborted + 10 + 6 records and 4 markers before the last
		// record's successor; partition 1: 20 + 4 records and 1 marker.
		if stored[0] != 30+1+5+1+10+1+6 || stored[1] != 20+1+4 {
			t.Fatalf("stored next offsets %v, want 0:%d 1:%d", stored, 30+1+5+1+10+1+6, 20+1+4)
		}
		committed, err := c.CommittedOffsets(ctx, app, topic)
		if err != nil {
			t.Fatal(err)
		}
		for p, o := range committed {
			if o != -1 {
				t.Fatalf("the pipe committed offset %d of partition %d to Kafka", o, p)
			}
		}
	})
}

// TestPipeFenced: two owners of a partition start from the same stored offset; the
// first batch to commit moves the offsets row, the other's batch is fenced and writes
// nothing; an owner whose start offset is stale is fenced too. A retry of a batch whose
// commit went through is not fenced. Kills the mutant without "AND next_offset = $5".
func TestPipeFenced(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := logTable(t, pool)
	p, err := NewPipe(ctx, PipeConfig[string, string]{
		App: pgtest.Name(t, "fence"), Brokers: []string{"127.0.0.1:1"}, Topic: "in", Key: serde.String(), Value: serde.String(),
		Pool: pool, Table: tbl,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from, to int64) []*sarama.ConsumerMessage {
		var out []*sarama.ConsumerMessage
		for o := from; o < to; o++ {
			out = append(out, &sarama.ConsumerMessage{Topic: "in", Partition: 0, Offset: o, Key: []byte("k"), Value: []byte(fmt.Sprint("v", o))})
		}
		return out
	}
	// Both owners found no row (-1).
	next, err := p.writeBatch(ctx, 0, -1, batch(0, 3))
	if err != nil || next != 3 {
		t.Fatalf("the new owner's batch: %d, %v", next, err)
	}
	if _, err := p.writeBatch(ctx, 0, -1, batch(0, 4)); !errors.Is(err, errFenced) {
		t.Fatalf("the old owner's batch from no row: %v, want fenced", err)
	}
	// The new owner goes on; the old one still believes the row holds 3.
	if next, err = p.writeBatch(ctx, 0, 3, batch(3, 6)); err != nil || next != 6 {
		t.Fatalf("the new owner's second batch: %d, %v", next, err)
	}
	if _, err := p.writeBatch(ctx, 0, 3, batch(3, 5)); !errors.Is(err, errFenced) || !strings.Contains(err.Error(), "in/0 from offset 3") {
		t.Fatalf("the old owner's batch from 3: %v, want fenced", err)
	}
	// A retry of the batch that went through (its commit's answer lost).
	log := p.log
	if next, err = p.writeRetrying(ctx, log, 0, 3, batch(3, 6)); err != nil || next != 6 {
		t.Fatalf("a retry of a committed batch: %d, %v; want 6, nil", next, err)
	}
	if n, dups, _ := logRows(t, pool, tbl.Name); n != 6 || dups != 0 {
		t.Fatalf("%d rows, %d twice; want 6 once each", n, dups)
	}
}
