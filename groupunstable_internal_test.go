package eddy

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestUnstableOffsetsObserve: the runtime reports sessions that end on unstable offsets
// once they have done so for longer than after, then once a minute; a session that ran
// or ended otherwise starts the count again.
func TestUnstableOffsetsObserve(t *testing.T) {
	var u unstableOffsets
	t0 := time.Unix(1000, 0)
	unstable := fmt.Errorf("session setup: %w", sarama.ErrUnstableOffsetCommit)
	after := 40 * time.Second
	steps := []struct {
		at     time.Duration
		err    error
		report bool
	}{
		{0, unstable, false},
		{39 * time.Second, unstable, false},
		{40 * time.Second, unstable, true},
		{70 * time.Second, unstable, false}, // reported 30 s ago
		{100 * time.Second, unstable, true}, // a minute on
		{101 * time.Second, nil, false},     // a session ran
		{102 * time.Second, unstable, false},
		{150 * time.Second, unstable, true},
		{151 * time.Second, errors.New("other"), false},
		{152 * time.Second, unstable, false},
	}
	for i, s := range steps {
		_, report := u.observe(s.err, t0.Add(s.at), after)
		if report != s.report {
			t.Fatalf("step %d (at %v, %v): report %v, want %v", i, s.at, s.err, report, s.report)
		}
	}
}
