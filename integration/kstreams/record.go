package kstreams

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// Record is a serialized record of a topic: the input of both sides and their output.
type Record struct {
	Topic string
	Key   []byte
	Value []byte // nil is a tombstone; empty is an empty value
	// Timestamp counts in milliseconds (Kafka's resolution).
	Timestamp time.Time
}

// String renders r for a test failure: strings quoted, 8-byte values also as int64.
func (r Record) String() string {
	return fmt.Sprintf("%s key=%s value=%s ts=%d", r.Topic, render(r.Key), render(r.Value), r.Timestamp.UnixMilli())
}

func render(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case len(b) == 8 && !printable(b):
		return fmt.Sprintf("int64(%d)", int64(binary.BigEndian.Uint64(b)))
	case utf8.Valid(b):
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("0x%x", b)
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(b)
}

// RunTopologyTest pipes input, in order, into a fresh topologytest driver running topo
// and returns what each of outputs received, in order: eddy's side of a differential test.
// The driver's application id is appID ("" for topologytest's default); give it the
// oracle's ("oracle-<topology>") to compare changelog topics.
func RunTopologyTest(topo *topology.Topology, appID string, input []Record, outputs []string) (map[string][]Record, error) {
	return RunTopologyTestRestart(topo, appID, input, outputs, -1)
}

// RunTopologyTestRestart is RunTopologyTest with the driver restarted (Driver.Restart:
// stores restored from their changelogs) before input record restartAt, if it is in
// [0, len(input)].
func RunTopologyTestRestart(topo *topology.Topology, appID string, input []Record, outputs []string, restartAt int) (map[string][]Record, error) {
	d, err := topologytest.New(topo, topologytest.Config{ApplicationID: appID})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	for i, r := range input {
		if i == restartAt {
			if err := d.Restart(); err != nil {
				return nil, fmt.Errorf("restart before input record %d: %w", i, err)
			}
		}
		if err := d.PipeRaw(r.Topic, r.Key, r.Value, nil, time.UnixMilli(r.Timestamp.UnixMilli())); err != nil {
			return nil, fmt.Errorf("input record %d (%s): %w", i, r, err)
		}
	}
	if restartAt == len(input) {
		if err := d.Restart(); err != nil {
			return nil, fmt.Errorf("restart after the input: %w", err)
		}
	}
	out := make(map[string][]Record, len(outputs))
	for _, topic := range outputs {
		list := []Record{}
		for _, r := range d.Records(topic) {
			list = append(list, Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		}
		out[topic] = list
	}
	return out, nil
}

// Diff compares the output of Kafka Streams (want) with eddy's (got) topic by topic:
// the same records in the same order, equal key bytes, value bytes (a tombstone only
// equals a tombstone) and millisecond timestamps. It returns "" when they are equal,
// else a report naming each differing topic, its first difference and the records
// around it.
func Diff(want, got map[string][]Record) string {
	var sb strings.Builder
	topics := slices.Sorted(maps.Keys(want))
	for t := range got {
		if _, ok := want[t]; !ok {
			topics = append(topics, t)
		}
	}
	for _, topic := range topics {
		w, wok := want[topic]
		g, gok := got[topic]
		switch {
		case !wok:
			fmt.Fprintf(&sb, "topic %s: Kafka Streams has no such output topic; eddy wrote %d records\n", topic, len(g))
			continue
		case !gok:
			fmt.Fprintf(&sb, "topic %s: eddy's side did not read it; Kafka Streams wrote %d records\n", topic, len(w))
			continue
		}
		i := 0
		for i < len(w) && i < len(g) && equal(w[i], g[i]) {
			i++
		}
		if i == len(w) && i == len(g) {
			continue
		}
		fmt.Fprintf(&sb, "topic %s: Kafka Streams wrote %d records, eddy %d; first difference at record %d:\n", topic, len(w), len(g), i)
		for j := max(0, i-2); j < min(max(len(w), len(g)), i+3); j++ {
			mark := "  "
			if j == i {
				mark = "->"
			}
			fmt.Fprintf(&sb, "  %s #%d kafka streams: %s\n  %s #%d eddy:          %s\n", mark, j, at(w, j), mark, j, at(g, j))
		}
	}
	return sb.String()
}

func at(recs []Record, i int) string {
	if i >= len(recs) {
		return "(none)"
	}
	r := recs[i]
	return fmt.Sprintf("key=%s value=%s ts=%d", render(r.Key), render(r.Value), r.Timestamp.UnixMilli())
}

func equal(a, b Record) bool {
	return bytes.Equal(a.Key, b.Key) && (a.Key == nil) == (b.Key == nil) &&
		bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil) &&
		a.Timestamp.UnixMilli() == b.Timestamp.UnixMilli()
}

// Shrink makes a failing input small for a report: it removes chunks of records, then
// single records, as long as fails still holds, and returns what is left (at most
// budget calls of fails).
func Shrink(input []Record, budget int, fails func([]Record) bool) []Record {
	cur := slices.Clone(input)
	for chunk := len(cur) / 2; chunk >= 1 && budget > 0; chunk /= 2 {
		for start := 0; start < len(cur) && budget > 0; {
			end := min(start+chunk, len(cur))
			cand := slices.Concat(cur[:start], cur[end:])
			budget--
			if fails(cand) {
				cur = cand
				continue
			}
			start = end
		}
	}
	return cur
}
