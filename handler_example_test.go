package eddy_test

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
)

// Guard the operational endpoints with a bearer token. /healthz and /readyz stay open
// for probes; a query forwarded to the key's owner carries the caller's Authorization
// header, so every instance must accept the same tokens. In production serve it with
// app.Server(addr, opts).ListenAndServe(), which adds the read timeouts.
func ExampleApp_HandlerWith() {
	topo, err := wordcount.Topology()
	if err != nil {
		panic(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: "wordcount", Brokers: []string{"localhost:9092"}})
	if err != nil {
		panic(err)
	}
	want := []byte("Bearer let-me-in") // from a secret store, not from the source
	h := app.HandlerWith(eddy.HandlerOptions{
		Timeout: 5 * time.Second,
		Authorize: func(r *http.Request) error {
			got := r.Header.Get("Authorization")
			if got == "" {
				return fmt.Errorf("%w: no Authorization header", eddy.ErrUnauthenticated)
			}
			if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
				return fmt.Errorf("wrong token from %s", r.RemoteAddr)
			}
			return nil
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tc := range []struct{ path, auth string }{
		{"/topology", ""},
		{"/topology", "Bearer guess"},
		{"/topology", "Bearer let-me-in"},
		{"/healthz", ""},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && tc.path == "/topology" {
			body = body[:len("Topologies:")]
		}
		fmt.Printf("%s %q: %d %s\n", tc.path, tc.auth, resp.StatusCode, bytes.TrimSpace(body))
	}
	// Output:
	// /topology "": 401 {"error":"unauthenticated"}
	// /topology "Bearer guess": 403 {"error":"forbidden"}
	// /topology "Bearer let-me-in": 200 Topologies:
	// /healthz "": 200 {"state":"created"}
}
