package eddy

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// A time parameter of digits too large for milliseconds is called out of range, not
// "neither milliseconds nor RFC 3339" (issue 26). Kills the mutant without the range
// check.
func TestTimeParamOutOfRange(t *testing.T) {
	r := httptest.NewRequest("GET", "/x?to=99999999999999999999", nil)
	_, err := parseTimeParam(r, "to", 0)
	if err == nil || !strings.Contains(err.Error(), "to: 99999999999999999999 milliseconds is out of range") {
		t.Fatalf("parseTimeParam: %v", err)
	}
	r = httptest.NewRequest("GET", "/x?to=soon", nil)
	if _, err := parseTimeParam(r, "to", 0); err == nil || !strings.Contains(err.Error(), "neither milliseconds") {
		t.Fatalf("parseTimeParam(soon): %v", err)
	}
}

// A failing forward is warned of once per owner every forwardWarnEvery, with the count
// held back (issue 26: 20 lines in 10 s while an instance was down). Kills the mutant
// without the limit.
func TestForwardFailuresAreRateLimited(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	var l rateLimitedLog
	for range 20 {
		l.warn(log, "b:1", "forwarded query failed", "owner", "b:1")
	}
	l.warn(log, "c:1", "forwarded query failed", "owner", "c:1")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "owner=b:1") || !strings.Contains(lines[1], "owner=c:1") {
		t.Fatalf("%d lines for 20 failures to one owner and one to another, want 2:\n%s", len(lines), out.String())
	}
	l.keys["b:1"].last = l.keys["b:1"].last.Add(-forwardWarnEvery)
	l.warn(log, "b:1", "forwarded query failed", "owner", "b:1")
	if !strings.Contains(out.String(), "held_back_since_last_warning=19") {
		t.Fatalf("the next warning does not count the 19 held back:\n%s", out.String())
	}
}
