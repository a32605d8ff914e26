package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// fakeDeleter records the purger's DeleteRecords calls and fails them as told.
type fakeDeleter struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]error // topic → the error of its next call
	done  chan struct{}    // a signal per call
}

func (f *fakeDeleter) DeleteRecords(topic string, below map[int32]int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %v", topic, below))
	err := f.fail[topic]
	delete(f.fail, topic)
	f.done <- struct{}{}
	return err
}

func (f *fakeDeleter) Close() error { return nil }

func (f *fakeDeleter) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// The purger's bookkeeping: requests for one topic are merged into one call with the
// highest offset per partition; a failed call is retried with what was asked meanwhile;
// a topic whose cleanup.policy refuses deletion is reported once and never asked again.
func TestPurgerMergesRetriesAndGivesUpOnRefusal(t *testing.T) {
	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(b)
	}), nil))
	f := &fakeDeleter{fail: map[string]error{}, done: make(chan struct{}, 100)}
	p := newPurger(func() (recordDeleter, error) { return f, nil }, time.Second, logger)
	// Asked before the purger runs: merged, the highest offset per partition.
	p.purge("rep", 0, 5, "")
	p.purge("rep", 0, 9, "")
	p.purge("rep", 0, 7, "")
	p.purge("rep", 1, 3, "")
	f.fail["rep"] = errors.New("broker busy")
	f.fail["win-changelog"] = fmt.Errorf("%w: %w", sarama.ErrDeleteRecords, sarama.ErrPolicyViolation)
	p.purge("win-changelog", 0, 40, "win")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-f.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("calls so far: %q", f.took())
			}
		}
	}
	wait(2)                             // rep (fails), win-changelog (refused)
	p.purge("rep", 1, 4, "")            // asked while the failed call waits for its retry
	p.purge("win-changelog", 0, 80, "") // refused: never asked again
	wait(1)                             // the retry: both asks merged
	want := []string{"rep map[0:9 1:3]", "win-changelog map[0:40]", "rep map[0:9 1:4]"}
	if got := f.took(); !slices.Equal(got, want) {
		t.Fatalf("DeleteRecords calls %q, want %q", got, want)
	}
	select {
	case <-f.done:
		t.Fatalf("a call after the retry: %q", f.took())
	case <-time.After(100 * time.Millisecond):
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if n := strings.Count(out, "cleanup.policy lacks delete"); n != 1 {
		t.Errorf("the refusal was reported %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "store=win") || !strings.Contains(out, "retrying later") {
		t.Errorf("the log names neither the store nor the retry:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(b []byte) (int, error) { return w(b) }
