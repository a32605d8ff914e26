package stream_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is the timestamp t0 + ms milliseconds.
func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// harness runs a DSL topology in topologytest.
type harness struct {
	t *testing.T
	d *topologytest.Driver
}

func run(t *testing.T, b *stream.Builder) *harness {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &harness{t: t, d: d}
}

// pipe writes a record with string key and value (nil value: "<nil>" is a tombstone).
func (h *harness) pipe(topic, key, value string, ms int64) {
	h.t.Helper()
	var v []byte
	if value != "<nil>" {
		v = []byte(value)
	}
	if err := h.d.PipeRaw(topic, []byte(key), v, nil, at(ms)); err != nil {
		h.t.Fatal(err)
	}
}

// out renders the records of topic as "key=value@ms" (value "<nil>" for a tombstone;
// long values, when long is set, as numbers).
func (h *harness) out(topic string, long bool) string {
	var parts []string
	for _, r := range h.d.Records(topic) {
		v := string(r.Value)
		switch {
		case r.Value == nil:
			v = "<nil>"
		case long:
			v = fmt.Sprint(int64(binary.BigEndian.Uint64(r.Value)))
		}
		parts = append(parts, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp.Sub(t0).Milliseconds()))
	}
	return strings.Join(parts, " ")
}

func (h *harness) want(topic string, long bool, want string) {
	h.t.Helper()
	if got := h.out(topic, long); got != want {
		h.t.Errorf("topic %s:\n got  %s\n want %s", topic, got, want)
	}
}
