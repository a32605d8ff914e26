package eddy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// A stream–table join whose inputs are all on the broker before a fresh application
// starts, the table's 1.5 MB per partition more than one fetch brings (1 MiB per
// partition), written in transactions (so its high-water mark stays one above its last
// record, a commit marker): with the default MaxTaskIdle every stream record joins the
// table version with the latest timestamp before its own, as Kafka Streams processes
// it (its default max.task.idle.ms 0 waits for records known to be on the broker) and
// as a Go oracle computes from the inputs in timestamp order. Without the wait the task
// processed the stream's records past the end of the table's first fetch, or before
// the table's claim had started, and joined older versions or none.
func TestJoinWaitsForTableRecordsOnTheBroker(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		table, clicks, out := c.Unique("idle-users"), c.Unique("idle-clicks"), c.Unique("idle-out")
		const parts = 2
		for _, topic := range []string{table, clicks, out} {
			if err := c.CreateTopic(ctx, topic, parts, nil); err != nil {
				t.Fatal(err)
			}
		}
		const keys, tableRecs, streamRecs = 100, 20000, 4000
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		pad := strings.Repeat("x", 140)
		type rec struct {
			key, value string
			ts         time.Time
		}
		// Table versions every 10 ms, stream records every 60 ms, offset by 5 ms: no
		// timestamp is shared, so the order across the topics is total. The last sixth
		// of the stream comes after the table's last version: there each task finds the
		// table's partition empty and its high-water mark one above the last record (the
		// commit marker), and must not wait for it.
		var tab, str []rec
		for i := range tableRecs {
			tab = append(tab, rec{fmt.Sprintf("k%d", i%keys), fmt.Sprintf("t%d|%s", i, pad), base.Add(time.Duration(10*i) * time.Millisecond)})
		}
		for j := range streamRecs {
			str = append(str, rec{fmt.Sprintf("k%d", (j*7)%keys), fmt.Sprintf("s%d", j), base.Add(time.Duration(60*j+5) * time.Millisecond)})
		}

		// The table in transactions of 1,000 records.
		cfg := kafkatest.NewSaramaConfig()
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Transaction.ID = c.Unique("idle-table-writer")
		cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
		p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := 0; i < len(tab); i += 1000 {
			if err := p.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			var msgs []*sarama.ProducerMessage
			for _, r := range tab[i:min(i+1000, len(tab))] {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: table, Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value), Timestamp: r.ts})
			}
			if err := p.SendMessages(msgs); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTxn(); err != nil {
				t.Fatal(err)
			}
		}
		var msgs []*sarama.ProducerMessage
		for _, r := range str {
			msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value), Timestamp: r.ts})
		}
		if err := c.Produce(ctx, clicks, msgs...); err != nil {
			t.Fatal(err)
		}

		// The oracle: the inputs in timestamp order, each stream record joined with its
		// key's latest table version before it (none: no output, an inner join).
		want := map[string]string{}
		current := map[string]string{}
		ti := 0
		for _, s := range str {
			for ti < len(tab) && tab[ti].ts.Before(s.ts) {
				current[tab[ti].key] = tab[ti].value
				ti++
			}
			if v, ok := current[s.key]; ok {
				want[s.value] = s.value + "@" + v
			}
		}

		sd := serde.String()
		b := stream.NewBuilder()
		users := stream.TableFrom(b, sd, sd, table)
		stream.Join(stream.From(b, sd, sd, []string{clicks}), users, func(c, u string) string { return c + "@" + u }).To(out, sd, sd)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		appID := c.Unique("idle")
		began := time.Now()
		in := start(t, topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t), Metrics: reg})
		if err := c.WaitProcessed(ctx, appID, clicks, table); err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		recs, err := kafkatest.ReadCommittedTyped(ctx, c, out, sd, sd)
		if err != nil {
			t.Fatal(err)
		}
		if err, done := in.exited(); done {
			t.Fatalf("app stopped: %v", err)
		}
		got := map[string]string{}
		for _, r := range recs {
			got[strings.SplitN(r.Value, "@", 2)[0]] = r.Value
		}
		wrong := 0
		for s, w := range want {
			if g := got[s]; g != w {
				if wrong < 5 {
					t.Errorf("stream record %s joined %q, want %q (the table version before it)", s, short(g), short(w))
				}
				wrong++
			}
		}
		for s, g := range got {
			if _, ok := want[s]; !ok {
				if wrong < 5 {
					t.Errorf("stream record %s joined %q, want no output (no table version before it)", s, short(g))
				}
				wrong++
			}
		}
		enforced := 0.0 // times the task gave up waiting
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "eddy_enforced_processing_total" {
				for _, m := range mf.GetMetric() {
					enforced += m.GetCounter().GetValue()
				}
			}
		}
		t.Logf("%s: %d outputs, %d of %d stream records differ from the oracle; processed in %v; enforced processing: %v",
			c.Name(), len(recs), wrong, len(str), took.Round(time.Millisecond), enforced)
		if len(recs) != len(want) {
			t.Errorf("%d outputs, want %d", len(recs), len(want))
		}
		// The broker counts the commit marker in the high-water mark (kfake as Kafka:
		// one above the last record), and the task's probe found it is only a marker:
		// no wait ran out.
		tabRecs, err := c.ReadCommitted(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		last := map[int32]int64{}
		for _, m := range tabRecs {
			last[m.Partition] = max(last[m.Partition], m.Offset)
		}
		hwm, err := c.EndOffsets(ctx, table, sarama.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			if hwm[p] != last[p]+2 {
				t.Errorf("table partition %d: high-water mark %d, last record %d: want the commit marker between", p, hwm[p], last[p])
			}
		}
		if enforced != 0 {
			t.Errorf("enforced processing counted %v times, want 0: the wait behind the table's final commit marker must end when the probe finds only the marker", enforced)
		}
	})
}

func short(s string) string {
	if i := strings.IndexByte(s, '|'); i >= 0 {
		return s[:i]
	}
	return s
}
