package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// wantOutput is the command's output on the sample input, worked out by hand from
// sample.go: every minute and session once, with its final count; u1's late view of
// 10:00:10 is not in minute 10:00 (closed at 10:01:30) but is in u1's session; the
// next morning's windows are still open and not written.
const wantOutput = `Page views per user and minute, final (clicks-views-per-minute):
u1	10:00:00–10:01:00	2
u1	10:01:00–10:02:00	1
u1	10:03:00–10:04:00	1
u2	10:00:00–10:01:00	1
u2	10:01:00–10:02:00	2
u2	10:09:00–10:10:00	1
u3	10:00:00–10:01:00	1
u3	10:02:00–10:03:00	1
u3	10:04:00–10:05:00	1

Sessions per user, final (clicks-sessions):
u1	10:00:05–10:03:00	5 views
u2	10:00:30–10:01:20	3 views
u2	10:09:00–10:09:00	1 view
u3	10:00:55–10:04:00	3 views
`

// The command on the embedded broker, with one partition (every user's views share
// one stream time) and with several.
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
