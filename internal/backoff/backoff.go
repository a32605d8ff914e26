// Package backoff paces retries: delays that double from an initial one up to a cap,
// and a sleep that a context cuts short. Every retry loop of eddy's runtime, restorer,
// readers and tools waits through it.
package backoff

import (
	"context"
	"time"
)

// Backoff gives the delays before successive retries: Initial, then twice the last,
// capped at Max. The zero value waits 100 ms, doubling up to 5 s.
type Backoff struct {
	Initial, Max time.Duration
	next         time.Duration
}

// Next returns the delay before the next retry and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	initial, maxDelay := b.Initial, b.Max
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if maxDelay <= 0 {
		maxDelay = 5 * time.Second
	}
	if b.next <= 0 {
		b.next = initial
	}
	d := min(b.next, maxDelay)
	b.next = min(2*b.next, maxDelay)
	return d
}

// Reset starts the delays again from Initial (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for the next delay, or until ctx ends (then it returns ctx's error).
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Sleep waits for d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
