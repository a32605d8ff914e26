package eddy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// fuzzLines are the input of FuzzHandler's word count.
var fuzzLines = []string{"all streams lead to kafka", "hello kafka streams", "Ünïcödé wörd a/b 100%"}

// runningWordCount starts a word count on an embedded broker, feeds it fuzzLines, and
// waits until its store holds every count. It returns the app and the counts.
func runningWordCount(f *testing.F) (*eddy.App, map[string]int64) {
	f.Helper()
	broker, err := kafkatest.NewBroker(kafkatest.SeedTopics(2, wordcount.InputTopic, wordcount.OutputTopic))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(broker.Close)
	topo, err := wordcount.Topology()
	if err != nil {
		f.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: "fuzz", Brokers: broker.Addrs(), StateDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	want := map[string]int64{}
	var msgs []*sarama.ProducerMessage
	for _, l := range fuzzLines {
		for _, w := range wordcount.Words(l) {
			want[w]++
		}
		msgs = append(msgs, &sarama.ProducerMessage{Value: sarama.StringEncoder(l)})
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	if err := broker.Cluster().Produce(pctx, wordcount.InputTopic, msgs...); err != nil {
		f.Fatal(err)
	}
	q, err := eddy.Query[string, int64](app, wordcount.StoreName)
	if err != nil {
		f.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		all := app.State() == eddy.StateRunning
		for w, n := range want {
			got, _, err := q.Get(w)
			all = all && err == nil && got == n
		}
		if all {
			return app, want
		}
		if time.Now().After(deadline) {
			f.Fatal("the word count did not count fuzzLines within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FuzzHandler sends raw HTTP requests, any bytes, to the handler of a running word
// count (every task local). Whatever the request, the answer is one of the statuses
// the handler documents, never a server error; an error is JSON that says what was
// wrong; and a query answered 200 gives the word's true count, a query answered 404
// names a word that was never counted.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		"GET /stores/counts/keys/kafka HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /stores/counts/keys/%C3%BCn%C3%AFc%C3%B6d%C3%A9 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /stores/counts/keys/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /stores/counts/keys/nothing HTTP/1.1\r\nHost: x\r\nX-Eddy-Forwarded: 10.0.0.1:80\r\n\r\n",
		"GET /stores/nope/keys/x HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /topology?format=mermaid HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /topology?format=%00 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /healthz HTTP/1.0\r\n\r\n",
		"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"GET /stores/counts/keys/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n",
		"GET /stores/counts/keys/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /stores/counts/keys/../../topology HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	app, want := runningWordCount(f)
	h := app.HandlerWith(eddy.HandlerOptions{Timeout: 5 * time.Second, MaxHeaderBytes: 2048, MaxBodyBytes: 64})
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return // the server answers 400 before any handler runs
		}
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code, body := rec.Code, rec.Body.String()
		switch code {
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			// The mux redirects to the cleaned path: on this host, never another (no
			// open redirect).
			if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
				t.Fatalf("%q: %d to %q", raw, code, loc)
			}
			return
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
			http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		default:
			t.Fatalf("%q: %d %s", raw, code, body)
		}
		ct := rec.Header().Get("Content-Type")
		// The handler's errors are JSON; the mux's own 404 and 405 are text, and its 400
		// for the request target "*" has no body.
		if code != http.StatusOK && !strings.HasPrefix(ct, "text/plain") && (ct != "" || body != "") {
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || ct != "application/json" {
				t.Fatalf("%q: %d with %s %q; want a JSON error", raw, code, ct, body)
			}
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead && code == http.StatusOK {
			t.Fatalf("%q: %s answered 200", raw, req.Method)
		}
		if !strings.HasPrefix(req.URL.Path, "/stores/") || req.Method != http.MethodGet {
			return
		}
		if code == http.StatusOK && strings.TrimSuffix(req.URL.Path, "/") == "/stores/"+wordcount.StoreName+"/keys" {
			// A key scan (GET /stores/{store}/keys): every entry is a counted word
			// with its count.
			var scan struct {
				Store   string
				Entries []struct {
					Key   string
					Value int64
				}
			}
			if err := json.Unmarshal([]byte(body), &scan); err != nil || scan.Store != wordcount.StoreName {
				t.Fatalf("%q: 200 %q: not a scan of %q: %v", raw, body, wordcount.StoreName, err)
			}
			for _, e := range scan.Entries {
				if n, ok := want[e.Key]; !ok || e.Value != n {
					t.Fatalf("%q: scan entry %+v; the count of %q is %d (counted: %v)", raw, e, e.Key, n, ok)
				}
			}
			return
		}
		switch code {
		case http.StatusOK:
			var a struct {
				Store, Key string
				Value      int64
			}
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatalf("%q: 200 %q: %v", raw, body, err)
			}
			if n, ok := want[a.Key]; !ok || a.Value != n || a.Store != wordcount.StoreName {
				t.Fatalf("%q: answered %+v; the count of %q is %d (counted: %v)", raw, a, a.Key, n, ok)
			}
		case http.StatusNotFound:
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(body), &e)
			for w := range want {
				if e.Error == "no key "+strconvQuote(w)+" in store \"counts\"" {
					t.Fatalf("%q: 404 for %q, which was counted", raw, w)
				}
			}
		}
	})
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
