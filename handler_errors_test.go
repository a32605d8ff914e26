package eddy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
)

// Every error answer is JSON, as docs/operations.md promises: an unknown route and a
// wrong method were ServeMux's plain "404 page not found" and "Method Not Allowed"
// (issue 26). Kills the mutant without jsonMuxErrors.
func TestUnknownRouteAndMethodAnswerJSON(t *testing.T) {
	base := serve(t, &http.Server{Handler: idleApp(t).HandlerWith(eddy.HandlerOptions{})})
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/nope", http.StatusNotFound, "no such route: /nope"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "method POST not allowed on /healthz; allowed: GET"},
	} {
		status, h, body := do(t, c.method, base+c.path, nil, "")
		var answer map[string]string
		if status != c.status || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &answer) != nil || !strings.Contains(answer["error"], c.want) {
			t.Errorf("%s %s: %d %q %q; want %d and JSON with an error saying %q", c.method, c.path, status, h.Get("Content-Type"), body, c.status, c.want)
		}
	}
	// A known route still answers as before.
	if status, _, body := do(t, "GET", base+"/healthz", nil, ""); status != http.StatusOK && status != http.StatusServiceUnavailable || !strings.Contains(body, "state") {
		t.Errorf("GET /healthz: %d %q", status, body)
	}
}
