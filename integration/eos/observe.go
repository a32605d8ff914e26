//go:build unix

package eos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/window"
)

// GatherConfig says what to read back after a run.
type GatherConfig struct {
	Brokers []string
	Names   Names
	Buckets int
	// Windows are the windowed aggregation's (the size decodes its keys); Join the
	// join's (zero: no join, its topics are not read).
	Windows WindowParams
	Join    JoinParams
	// Finals: the application has the windowed aggregation's final results.
	Finals bool
	// StableWait is how long to wait for every last stable offset to reach its
	// high-water mark before reading (commit markers are written shortly after a
	// commit returns); what is still open then counts as hanging. Default 5 s, well
	// below the 10 s transaction timeout, so a transaction only the broker's timeout
	// would end is found.
	StableWait time.Duration
	Logger     *slog.Logger
}

// newClient makes a sarama client for reading back.
func newClient(brokers []string) (sarama.Client, error) {
	sc := kafkatest.NewSaramaConfig()
	sc.ClientID = "eos-verify"
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("eos: connect to %v: %w", brokers, err)
	}
	return c, nil
}

// highWaterMark lists a partition's end offset with read_uncommitted isolation.
func highWaterMark(client sarama.Client, topic string, p int32) (int64, error) {
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
			_ = client.RefreshMetadata(topic)
		}
		broker, err := client.Leader(topic, p)
		if err != nil {
			lastErr = err
			continue
		}
		req := sarama.NewOffsetRequest(client.Config().Version)
		req.IsolationLevel = sarama.ReadUncommitted
		req.AddBlock(topic, p, sarama.OffsetNewest, 1)
		resp, err := broker.GetAvailableOffsets(req)
		if err != nil {
			lastErr = err
			continue
		}
		b := resp.GetBlock(topic, p)
		if b == nil {
			lastErr = sarama.ErrIncompleteResponse
			continue
		}
		if !errors.Is(b.Err, sarama.ErrNoError) {
			lastErr = b.Err
			continue
		}
		if b.Offset >= 0 {
			return b.Offset, nil
		}
		if len(b.Offsets) > 0 {
			return b.Offsets[0], nil
		}
		lastErr = sarama.ErrIncompleteResponse
	}
	return 0, fmt.Errorf("high-water mark of %s/%d: %w", topic, p, lastErr)
}

// partitionEnds returns the ends of every partition of topic.
func partitionEnds(client sarama.Client, topic string) ([]PartitionEnd, error) {
	if err := client.RefreshMetadata(topic); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	out := make([]PartitionEnd, 0, len(parts))
	for _, p := range parts {
		start, stable, err := kread.EndOffsets(client, topic, p)
		if err != nil {
			return nil, err
		}
		high, err := highWaterMark(client, topic, p)
		if err != nil {
			return nil, err
		}
		out = append(out, PartitionEnd{Topic: topic, Partition: p, Start: start, Stable: stable, High: high})
	}
	return out, nil
}

// Gather reads a run back with read_committed: the input, the outputs, the changelogs
// and the ends of every output, repartition and changelog partition.
func Gather(ctx context.Context, cfg GatherConfig) (*Observed, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StableWait <= 0 {
		cfg.StableWait = 5 * time.Second
	}
	client, err := newClient(cfg.Brokers)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	n := cfg.Names
	checked := append(n.OutputTopics(), n.Repartition())
	for _, s := range append(Stores(), WindowStores()...) {
		checked = append(checked, n.Changelog(s))
	}
	// The DSL's stores and repartition topics have generated names (the join's window
	// stores, a suppression buffer): every internal topic of the application is
	// checked for open transactions.
	if err := client.RefreshMetadata(); err != nil {
		return nil, fmt.Errorf("eos: metadata: %w", err)
	}
	topics, err := client.Topics()
	if err != nil {
		return nil, fmt.Errorf("eos: topics: %w", err)
	}
	for _, t := range topics {
		internal := strings.HasPrefix(t, n.App+"-") && (strings.HasSuffix(t, "-changelog") || strings.HasSuffix(t, "-repartition"))
		if internal && !slices.Contains(checked, t) {
			checked = append(checked, t)
		}
	}
	ends := map[string][]PartitionEnd{}
	deadline := time.Now().Add(cfg.StableWait)
	for {
		open := 0
		for _, t := range append([]string{n.Input, n.Right}, checked...) {
			es, err := partitionEnds(client, t)
			if err != nil {
				return nil, fmt.Errorf("eos: %w", err)
			}
			ends[t] = es
			for _, e := range es {
				if e.Stable != e.High {
					open++
				}
			}
		}
		if open == 0 || time.Now().After(deadline) {
			if open > 0 {
				logger.Warn("eos: partitions with an open transaction", "partitions", open, "waited", cfg.StableWait)
			}
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	o := &Observed{
		Buckets:             cfg.Buckets,
		Windows:             cfg.Windows,
		Join:                cfg.Join,
		Input:               map[int32][]InRecord{},
		Echo:                map[int32][]OutRecord{},
		Outputs:             map[string]map[int32][]OutRecord{},
		OutputPartitions:    map[string]int32{"echo": int32(len(ends[n.Echo]))},
		ChangelogPartitions: map[string]int32{},
		Changelogs:          map[string]map[int32][]ChangeRecord{},
	}
	for _, t := range checked {
		o.Ends = append(o.Ends, ends[t]...)
	}
	o.Partitions = int32(len(ends[n.Input]))
	read := func(topic string, fn func(p int32, r kread.Record)) error {
		for _, e := range ends[topic] {
			if err := kread.ReadRange(ctx, client, topic, e.Partition, e.Start, e.Stable, func(r kread.Record) error {
				fn(e.Partition, r)
				return nil
			}); err != nil {
				return fmt.Errorf("eos: read %s/%d: %w", topic, e.Partition, err)
			}
		}
		return nil
	}
	keys := interner{}
	began := time.Now()
	if err := read(n.Input, func(p int32, r kread.Record) {
		v, err := DecodeInt64(r.Value)
		if err != nil {
			v = -1 // the driver wrote every input record; -1 matches no output
		}
		o.Input[p] = append(o.Input[p], InRecord{Offset: r.Offset, Key: keys.get(r.Key), Value: v, Timestamp: r.Timestamp.UnixMilli()})
	}); err != nil {
		return nil, err
	}
	if err := read(n.Echo, func(p int32, r kread.Record) {
		rec := OutRecord{Offset: r.Offset, Key: keys.get(r.Key)}
		if v, err := DecodeInt64(r.Value); err != nil {
			rec.Bad = err.Error()
		} else {
			rec.Input, rec.Value = v, v
		}
		o.Echo[p] = append(o.Echo[p], rec)
	}); err != nil {
		return nil, err
	}
	for store, topic := range map[string]string{StoreSum: n.Sums, StoreCount: n.Counts, StoreMax: n.Maxes, StoreBucketCount: n.BucketCounts} {
		outs := map[int32][]OutRecord{}
		o.Outputs[store] = outs
		o.OutputPartitions[store] = int32(len(ends[topic]))
		if err := read(topic, func(p int32, r kread.Record) {
			rec := OutRecord{Offset: r.Offset, Key: keys.get(r.Key)}
			if u, err := DecodeUpdate(r.Value); err != nil {
				rec.Bad = err.Error()
			} else {
				rec.Input, rec.Value = u.Input, u.Value
			}
			outs[p] = append(outs[p], rec)
		}); err != nil {
			return nil, err
		}
	}
	if cfg.Windows.SizeMs > 0 {
		winKeys := window.TimeWindowedSerde(serde.String(), cfg.Windows.Size())
		o.WinUpdates = map[int32][]WinRecord{}
		o.OutputPartitions[OutWinUpdates] = int32(len(ends[n.WinUpdates]))
		if err := read(n.WinUpdates, func(p int32, r kread.Record) {
			o.WinUpdates[p] = append(o.WinUpdates[p], decodeWinRecord(winKeys, n.WinUpdates, r))
		}); err != nil {
			return nil, err
		}
		if cfg.Finals {
			o.WinFinals = map[int32][]WinRecord{}
			o.OutputPartitions[OutWinFinals] = int32(len(ends[n.WinFinals]))
			if err := read(n.WinFinals, func(p int32, r kread.Record) {
				o.WinFinals[p] = append(o.WinFinals[p], decodeWinRecord(winKeys, n.WinFinals, r))
			}); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Join.DiffMs > 0 {
		o.Right = map[int32][]InRecord{}
		if err := read(n.Right, func(p int32, r kread.Record) {
			v, err := DecodeInt64(r.Value)
			if err != nil {
				v = -1
			}
			o.Right[p] = append(o.Right[p], InRecord{Offset: r.Offset, Key: keys.get(r.Key), Value: v, Timestamp: r.Timestamp.UnixMilli()})
		}); err != nil {
			return nil, err
		}
		o.Joins = map[int32][]JoinRecord{}
		o.OutputPartitions[OutJoins] = int32(len(ends[n.Joins]))
		if err := read(n.Joins, func(p int32, r kread.Record) {
			rec := JoinRecord{Offset: r.Offset, Key: keys.get(r.Key), Timestamp: r.Timestamp.UnixMilli()}
			if u, err := DecodeUpdate(r.Value); err != nil {
				rec.Bad = err.Error()
			} else {
				rec.Left, rec.Right = u.Input, u.Value
			}
			o.Joins[p] = append(o.Joins[p], rec)
		}); err != nil {
			return nil, err
		}
	}
	for _, store := range Stores() {
		topic := n.Changelog(store)
		logs := map[int32][]ChangeRecord{}
		o.Changelogs[store] = logs
		o.ChangelogPartitions[store] = int32(len(ends[topic]))
		if err := read(topic, func(p int32, r kread.Record) {
			c := ChangeRecord{Offset: r.Offset, Key: keys.get(r.Key)}
			if r.Value == nil {
				c.Tombstone = true
			} else if v, err := DecodeInt64(r.Value); err != nil {
				c.Bad = err.Error()
			} else {
				c.Value = v
			}
			logs[p] = append(logs[p], c)
		}); err != nil {
			return nil, err
		}
		for _, e := range ends[topic] {
			if e.Start > 0 {
				return nil, fmt.Errorf("eos: changelog %s/%d starts at %d, not 0: its replay would be incomplete", topic, e.Partition, e.Start)
			}
		}
	}
	o.OffsetCommits, err = readOffsetCommits(ctx, client, n.App, map[string]bool{n.Input: true, n.Repartition(): true})
	if err != nil {
		return nil, err
	}
	logger.Info("eos: read back the run", "input_partitions", o.Partitions, "took", time.Since(began).Round(time.Millisecond))
	return o, nil
}

// decodeWinRecord reads a record of a windowed output topic.
func decodeWinRecord(keys serde.Serde[window.Windowed[string]], topic string, r kread.Record) WinRecord {
	rec := WinRecord{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	k, err := keys.Deserialize(topic, r.Key)
	if err != nil {
		rec.Bad = fmt.Sprintf("key %q: %v", r.Key, err)
		return rec
	}
	rec.Key, rec.Start = k.Key, k.Window.StartMs()
	if rec.Agg, err = DecodeWinAgg(r.Value); err != nil {
		rec.Bad = err.Error()
	}
	return rec
}

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

// readOffsetCommits reads the committed offsets group wrote for topics, in the order
// of the __consumer_offsets log (read_committed: transactional commits that were
// aborted are left out). The embedded broker has no such topic: none then.
func readOffsetCommits(ctx context.Context, client sarama.Client, group string, topics map[string]bool) ([]OffsetCommit, error) {
	es, err := partitionEnds(client, offsetsTopic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return nil, nil // the embedded broker keeps offsets elsewhere
	}
	if err != nil {
		return nil, fmt.Errorf("eos: %w", err)
	}
	var out []OffsetCommit
	for _, e := range es {
		if err := kread.ReadRange(ctx, client, offsetsTopic, e.Partition, e.Start, e.Stable, func(r kread.Record) error {
			g, topic, p, ok := decodeOffsetCommitKey(r.Key)
			if !ok || g != group || !topics[topic] || len(r.Value) < 10 {
				return nil // another record type, group or topic, or a tombstone
			}
			out = append(out, OffsetCommit{
				LogPartition: e.Partition, LogOffset: r.Offset, Topic: topic, Partition: p,
				Offset: int64(binary.BigEndian.Uint64(r.Value[2:10])), Time: r.Timestamp,
			})
			return nil
		}); err != nil {
			return nil, fmt.Errorf("eos: read %s/%d: %w", offsetsTopic, e.Partition, err)
		}
	}
	return out, nil
}

// decodeOffsetCommitKey reads the key of an offset commit record (key versions 0 and
// 1): group, topic, partition.
func decodeOffsetCommitKey(b []byte) (group, topic string, partition int32, ok bool) {
	if len(b) < 2 || binary.BigEndian.Uint16(b) > 1 {
		return "", "", 0, false
	}
	b = b[2:]
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", false
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	if group, ok = str(); !ok {
		return "", "", 0, false
	}
	if topic, ok = str(); !ok || len(b) < 4 {
		return "", "", 0, false
	}
	return group, topic, int32(binary.BigEndian.Uint32(b)), true
}

// interner shares the strings of repeated keys.
type interner map[string]string

func (in interner) get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	in[s] = s
	return s
}
