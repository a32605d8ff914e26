package backoff_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/backoff"
)

func TestDelaysDoubleUpToTheCap(t *testing.T) {
	b := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	b.Reset()
	if d := b.Next(); d != 10*time.Millisecond {
		t.Errorf("after Reset: %v, want 10ms", d)
	}
	var zero backoff.Backoff
	if d := zero.Next(); d != 100*time.Millisecond {
		t.Errorf("zero value's first delay %v, want 100ms", d)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := backoff.Backoff{Initial: time.Hour}
	began := time.Now()
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) || time.Since(began) > time.Second {
		t.Errorf("Wait on a cancelled context: %v after %v", err, time.Since(began))
	}
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
}
