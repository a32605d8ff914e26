package eddy_test

import (
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/kafkatest"
)

// TestRecoveryAttemptsCountAcrossCommits: a commit the broker keeps rejecting (EndTxn
// answers UNKNOWN_PRODUCER_ID four times running; sarama reports it abortable) is one
// failure retried with a growing backoff: the attempt counter of the rollback warnings
// goes 1, 2, 3, 4, where it used to start again at 1 at every rejected commit (replay
// succeeded, so each rejection began a new recovery), and the budget that stops a
// failure that cannot pass (minRecoveries, recoveryBudget) never ran out.
func TestRecoveryAttemptsCountAcrossCommits(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newWordCount(t, c, 1)
	var rejected atomic.Int32
	b.Kfake().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || rejected.Load() >= 4 {
			return nil, nil, false
		}
		b.Kfake().KeepControl()
		rejected.Add(1)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownProducerID.Code
		return resp, nil, true
	})
	logs := newLogCapture()
	cfg := e.config(t)
	cfg.Logger = slog.New(logs)
	in := start(t, e.topo, cfg)
	e.produce(t, 20)
	e.waitCounts(t, time.Minute, "the counts")
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	e.checkExactlyOnce(t)
	rollbacks := logs.grep("rolling back")
	var attempts []string
	for _, l := range rollbacks {
		_, a, _ := strings.Cut(l, " attempt=")
		a, _, _ = strings.Cut(a, " ")
		attempts = append(attempts, a)
	}
	t.Logf("attempts: %v", attempts)
	if want := []string{"1", "2", "3", "4"}; !slices.Equal(attempts, want) {
		t.Fatalf("attempts of the rollbacks: %v, want %v", attempts, want)
	}
}
