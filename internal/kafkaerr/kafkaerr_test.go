package kafkaerr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kafkaerr"
)

func TestExplainNamesTheCodeAndKeepsTheChain(t *testing.T) {
	err := kafkaerr.Explain(fmt.Errorf("producer: send: %w", sarama.ErrProducerFenced))
	want := "producer: send: kafka server: PRODUCER_FENCED (error code 90): there is a newer producer with the same transactional ID which fences the current one"
	if err.Error() != want {
		t.Errorf("Explain:\n got %q\nwant %q", err, want)
	}
	if !errors.Is(err, sarama.ErrProducerFenced) {
		t.Error("the explained error no longer matches sarama.ErrProducerFenced")
	}
	var ke sarama.KError
	if !errors.As(err, &ke) || ke != 90 {
		t.Errorf("errors.As KError = %d, want 90", ke)
	}
}

func TestExplainLeavesOtherErrorsAlone(t *testing.T) {
	for _, err := range []error{nil, errors.New("plain"), sarama.ErrNotCoordinatorForConsumer, sarama.ErrInvalidUpdateVersion} {
		if got := kafkaerr.Explain(err); got != err {
			t.Errorf("Explain(%v) = %v, want it unchanged", err, got)
		}
	}
}

// Every code sarama leaves undescribed from 90 on has a name here: a sarama upgrade that
// describes one makes this fail, and the entry can go.
func TestEveryUndescribedCodeHasAName(t *testing.T) {
	for code := sarama.KError(90); code <= 133; code++ {
		undescribed := strings.Contains(code.Error(), "how did this happen")
		c, ok := kafkaerr.Lookup(code)
		switch {
		case undescribed && !ok:
			t.Errorf("code %d: sarama does not describe it and kafkaerr has no name for it", code)
		case !undescribed && ok:
			t.Errorf("code %d: sarama describes it (%q); kafkaerr's %s is not needed", code, code.Error(), c.Name)
		case ok && (c.Name == "" || c.Meaning == ""):
			t.Errorf("code %d: empty name or meaning", code)
		}
	}
}
