package eddytopo

import (
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// eventTime reads the event time of a "ms:payload" value; false without one.
func eventTime(v string) (time.Time, bool) {
	ms, _, ok := strings.Cut(v, ":")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// timestamps is T8: stream "ts-in" with the value's event time, or the partition time
// for a value without one (nil included) → "ts-out", and counted per key → "ts-count";
// table "ts-table" with the value's event time, or the record's own timestamp without
// one (tombstones: see stream.TableFromConsumed) → toStream → "ts-table-out".
func timestamps(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	in := stream.FromConsumed(b, stream.Consume(str, nstr).WithTimestamps(func(r processor.Record[string, *string], partitionTime time.Time) (time.Time, error) {
		if r.Value != nil {
			if t, ok := eventTime(*r.Value); ok {
				return t, nil
			}
		}
		return partitionTime, nil
	}), []string{"ts-in"})
	in.To("ts-out", str, nstr)
	stream.ToStream(in.GroupByKey(str, nstr).Count()).To("ts-count", str, ni64)
	table := stream.TableFromConsumed(b, stream.Consume(str, str).WithTimestamps(func(r processor.Record[string, string], _ time.Time) (time.Time, error) {
		if t, ok := eventTime(r.Value); ok {
			return t, nil
		}
		return r.Timestamp, nil
	}), "ts-table")
	stream.ToStream(table).To("ts-table-out", str, nstr)
	return b.Build()
}
