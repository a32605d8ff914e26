package eddy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// idleApp is an App that is never run: enough for the endpoints that do not need a
// running application.
func idleApp(t *testing.T) *eddy.App {
	t.Helper()
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: "h", Brokers: []string{"127.0.0.1:1"}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// serve serves h on a fresh port until the test ends and returns its base URL.
func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// do sends a request with headers and body and returns status, headers and body.
func do(t *testing.T, method, u string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body = nil
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

const token = "Bearer s3cret"

// authorize is the hook of the tests: a bearer token.
func authorize(r *http.Request) error {
	switch r.Header.Get("Authorization") {
	case "":
		return fmt.Errorf("%w: no Authorization header", eddy.ErrUnauthenticated)
	case token:
		return nil
	default:
		return errors.New("wrong token")
	}
}

func TestHandlerAuthorize(t *testing.T) {
	base := serve(t, &http.Server{Handler: idleApp(t).HandlerWith(eddy.HandlerOptions{Authorize: authorize})})
	good := http.Header{"Authorization": {token}}
	bad := http.Header{"Authorization": {"Bearer guess"}}
	for _, tc := range []struct {
		path   string
		header http.Header
		want   int
	}{
		{"/topology", nil, http.StatusUnauthorized},
		{"/topology", bad, http.StatusForbidden},
		{"/topology", good, http.StatusOK},
		{"/stores/counts/keys/x", nil, http.StatusUnauthorized},
		{"/stores/counts/keys/x", bad, http.StatusForbidden},
		{"/stores/counts/keys/x", good, http.StatusServiceUnavailable}, // authorized; the app is not running
		{"/healthz", nil, http.StatusOK},                               // probes need no credentials
		{"/readyz", nil, http.StatusServiceUnavailable},
	} {
		code, _, body := do(t, "GET", base+tc.path, tc.header, "")
		if code != tc.want {
			t.Errorf("GET %s with %v: %d %s; want %d", tc.path, tc.header, code, body, tc.want)
		}
		if code == http.StatusForbidden && strings.Contains(body, "wrong token") {
			t.Errorf("GET %s: the hook's error reached the client: %s", tc.path, body)
		}
	}
}

func TestHandlerTimeout(t *testing.T) {
	slow := func(r *http.Request) error {
		select { // a hook (or a store read) that takes too long
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return nil
	}
	base := serve(t, &http.Server{Handler: idleApp(t).HandlerWith(eddy.HandlerOptions{Timeout: 200 * time.Millisecond, Authorize: slow})})
	began := time.Now()
	code, h, body := do(t, "GET", base+"/topology", nil, "")
	if took := time.Since(began); code != http.StatusServiceUnavailable || took > 2*time.Second ||
		!strings.Contains(body, "timed out") || h.Get("Content-Type") != "application/json" {
		t.Fatalf("slow request: %d %s (%s) after %v; want a JSON 503 after about 200ms", code, body, h.Get("Content-Type"), took)
	}
}

func TestHandlerLimits(t *testing.T) {
	app := idleApp(t)
	// Through any http.Server (its own header limit is 1 MiB), the handler applies its
	// limits; through App.Server, the server applies the header limit while reading.
	for name, srv := range map[string]*http.Server{
		"handler": {Handler: app.HandlerWith(eddy.HandlerOptions{MaxHeaderBytes: 4 << 10, MaxBodyBytes: 100})},
		"server":  app.Server("", eddy.HandlerOptions{MaxHeaderBytes: 4 << 10, MaxBodyBytes: 100}),
	} {
		t.Run(name, func(t *testing.T) {
			base := serve(t, srv)
			if code, _, body := do(t, "GET", base+"/topology", http.Header{"X-Big": {strings.Repeat("x", 8<<10)}}, ""); code != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("8 KiB header: %d %s; want 431", code, body)
			}
			if code, _, body := do(t, "GET", base+"/stores/counts/keys/"+strings.Repeat("k", 8<<10), nil, ""); code != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("8 KiB URL: %d %s; want 431", code, body)
			}
			if code, _, body := do(t, "GET", base+"/topology", nil, strings.Repeat("b", 1000)); code != http.StatusRequestEntityTooLarge {
				t.Errorf("1000-byte body: %d %s; want 413", code, body)
			}
			if code, _, body := do(t, "GET", base+"/topology", http.Header{"X-Small": {"y"}}, "ok"); code != http.StatusOK {
				t.Errorf("small request: %d %s; want 200", code, body)
			}
		})
	}
}

// App.Server drops a client that sends its request headers too slowly.
func TestServerSlowClient(t *testing.T) {
	base := serve(t, idleApp(t).Server("", eddy.HandlerOptions{Timeout: 300 * time.Millisecond}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil { // and never the end
		t.Fatal(err)
	}
	began := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a request that never ended was answered %d", resp.StatusCode)
		}
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the server held the connection of a client that stopped sending for %v", took)
	}
}

// fakeOwner stands at the AdvertisedAddr of instance b: it answers the queries a
// forwards there as the test tells it to.
type fakeOwner struct {
	addr     string
	srv      *http.Server
	requests atomic.Int64
	mu       sync.Mutex
	auth     string
	serve    func(w http.ResponseWriter, r *http.Request)
}

func (f *fakeOwner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	f.auth = r.Header.Get("Authorization")
	serve := f.serve
	f.mu.Unlock()
	serve(w, r)
}

func (f *fakeOwner) set(fn func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	f.serve = fn
	f.mu.Unlock()
	f.requests.Store(0)
}

// Forwarding: at most one hop even when the owner sends the query back, no redirect
// followed, a slow owner bounded by the timeout, a large answer not relayed, the
// caller's credentials passed on, and errors that name no address.
func TestQueryForwardingIsBounded(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		lnA, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lnB, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfgA := e.config(t)
		cfgA.AdvertisedAddr = lnA.Addr().String()
		a := start(t, e.topo, cfgA)
		srvA := &http.Server{Handler: a.app.HandlerWith(eddy.HandlerOptions{Timeout: time.Second, MaxForwardedBytes: 1024, Authorize: authorize})}
		go func() { _ = srvA.Serve(lnA) }()
		t.Cleanup(func() { _ = srvA.Close() })
		baseA := "http://" + lnA.Addr().String()

		owner := &fakeOwner{addr: lnB.Addr().String()}
		owner.srv = &http.Server{Handler: owner}
		go func() { _ = owner.srv.Serve(lnB) }()
		t.Cleanup(func() { _ = owner.srv.Close() })
		cfgB := e.config(t)
		cfgB.AdvertisedAddr = owner.addr
		b := start(t, e.topo, cfgB)

		e.produce(t, 300)
		e.waitCounts(t, time.Minute, "the counts")
		waitFor(t, time.Minute, "both instances running with 4 tasks each", func() (bool, error) {
			return a.app.State() == eddy.StateRunning && b.app.State() == eddy.StateRunning && len(a.app.Tasks()) == 4 && len(b.app.Tasks()) == 4, nil
		})
		q, err := eddy.Query[string, int64](a.app, wordcount.StoreName)
		if err != nil {
			t.Fatal(err)
		}
		var remote []string
		for w := range e.want {
			o, local, err := q.Owner(w)
			if err != nil {
				t.Fatal(err)
			}
			if !local && o == owner.addr {
				remote = append(remote, w)
			}
		}
		if len(remote) == 0 {
			t.Fatal("no word is held by b")
		}
		query := func(word string) (int, http.Header, string) {
			return do(t, "GET", baseA+"/stores/counts/keys/"+url.PathEscape(word), http.Header{"Authorization": {token}}, "")
		}
		word := remote[0]

		t.Run("credentials are passed on", func(t *testing.T) {
			owner.set(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"store":"counts","key":"x","value":1}`)
			})
			code, h, body := query(word)
			if code != http.StatusOK || h.Get("X-Eddy-Served-By") != owner.addr || owner.auth != token {
				t.Fatalf("%d %s served by %q; the owner saw Authorization %q", code, body, h.Get("X-Eddy-Served-By"), owner.auth)
			}
		})
		t.Run("no loop", func(t *testing.T) {
			// The owner's view of the group differs: it sends the query back to a,
			// headers and all. a must answer it itself (not ready), not forward again.
			owner.set(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), "GET", baseA+r.URL.RequestURI(), nil)
				req.Header = r.Header.Clone()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer resp.Body.Close()
				w.WriteHeader(resp.StatusCode)
				_, _ = io.Copy(w, resp.Body)
			})
			for _, w := range remote[:min(5, len(remote))] {
				code, _, body := query(w)
				if n := owner.requests.Swap(0); code != http.StatusServiceUnavailable || n != 1 {
					t.Fatalf("query %q sent back by its owner: %d %s, the owner got %d requests; want 503 after one hop", w, code, body, n)
				}
			}
		})
		t.Run("no redirect followed", func(t *testing.T) {
			owner.set(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, baseA+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			})
			code, _, body := query(word)
			if n := owner.requests.Load(); code != http.StatusBadGateway || n != 1 {
				t.Fatalf("owner redirects: %d %s after %d owner requests; want 502 after one", code, body, n)
			}
		})
		t.Run("slow owner", func(t *testing.T) {
			owner.set(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			})
			began := time.Now()
			code, _, body := query(word)
			if took := time.Since(began); code != http.StatusServiceUnavailable || took > 4*time.Second {
				t.Fatalf("slow owner: %d %s after %v; want 503 after about the 1s timeout", code, body, took)
			}
		})
		t.Run("large answer", func(t *testing.T) {
			owner.set(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, strings.Repeat("x", 4096))
			})
			code, _, body := query(word)
			if code != http.StatusBadGateway || strings.Contains(body, "xxxx") {
				t.Fatalf("a 4 KiB answer with a 1 KiB limit: %d %.100s; want 502", code, body)
			}
		})
		t.Run("owner down", func(t *testing.T) {
			_ = owner.srv.Close()
			code, h, body := query(word)
			if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
				t.Fatalf("owner down: %d %s; want 503 with Retry-After", code, body)
			}
			for _, leak := range []string{owner.addr, "dial", "refused", "127.0.0.1"} {
				if strings.Contains(body, leak) {
					t.Fatalf("owner down: the answer %s names %q", body, leak)
				}
			}
		})
	})
}

// fragile is a value serde that fails on some stored values: with an error that
// names a file (an internal detail), or with a panic. Keys: it panics serializing
// "boom".
func fragile() serde.Serde[string] {
	return serde.Funcs("Fragile",
		func(_ string, v string) ([]byte, error) { return []byte(v), nil },
		func(_ string, b []byte) (string, error) {
			switch string(b) {
			case "error":
				return "", errors.New("open /var/lib/secret/state.db: permission denied")
			case "panic":
				panic("fragile: cannot read " + string(b))
			}
			return string(b), nil
		})
}

func fragileKeys() serde.Serde[string] {
	return serde.Funcs("FragileKeys",
		func(_ string, v string) ([]byte, error) {
			if v == "boom" {
				panic("fragile key serde")
			}
			return []byte(v), nil
		},
		func(_ string, b []byte) (string, error) { return string(b), nil })
}

type point struct{ X, Y int }

type putter struct {
	store statestore.KeyValueStore[string, string]
}

func (p *putter) Init(ctx processor.Context[string, string]) (err error) {
	p.store, err = processor.KeyValueStore[string, string](ctx, "values")
	return err
}

func (p *putter) Process(rec processor.Record[string, string]) error {
	return p.store.Put(rec.Key, rec.Value)
}

func (p *putter) Close() error { return nil }

// A 5xx answer says what failed, not how: no serde error, path or panic text.
func TestQueryErrorsLeakNoInternals(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		input := c.Unique("values-in")
		if err := c.CreateTopic(ctxT(t), input, 1, nil); err != nil {
			t.Fatal(err)
		}
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.String(), serde.String(), input)
		topology.AddProcessor(b, "put", func() processor.Processor[string, string, string, string] { return &putter{} }, "in")
		topology.AddKeyValueStore(b, "values", fragileKeys(), fragile(), "put")
		topology.AddKeyValueStore(b, "byPoint", serde.Nullable(serde.JSON[point]()), serde.String(), "put")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := start(t, topo, eddy.Config{ApplicationID: c.Unique("leak"), Brokers: c.Addrs(), StateDir: t.TempDir()})
		base := serve(t, &http.Server{Handler: in.app.Handler()})
		var msgs []*sarama.ProducerMessage
		for _, kv := range [][2]string{{"e", "error"}, {"p", "panic"}, {"ok", "fine"}} {
			msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder(kv[0]), Value: sarama.StringEncoder(kv[1])})
		}
		if err := c.Produce(ctxT(t), input, msgs...); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the values to be committed", func() (bool, error) {
			code, _, _ := get(t, base+"/stores/values/keys/ok")
			return code == http.StatusOK, nil
		})
		for _, tc := range []struct {
			key   string
			want  int
			leaks []string
		}{
			{"e", http.StatusInternalServerError, []string{"/var/lib", "permission", "Fragile"}},
			{"p", http.StatusInternalServerError, []string{"panic", "fragile", "goroutine"}},
			{"boom", http.StatusInternalServerError, []string{"panic", "fragile", "goroutine"}},
		} {
			code, _, body := get(t, base+"/stores/values/keys/"+tc.key)
			if code != tc.want {
				t.Errorf("key %q: %d %s; want %d", tc.key, code, body, tc.want)
			}
			for _, leak := range tc.leaks {
				if strings.Contains(strings.ToLower(body), strings.ToLower(leak)) {
					t.Errorf("key %q: the answer %s gives away %q", tc.key, body, leak)
				}
			}
		}
		if code, _, body := get(t, base+"/stores/values/keys/ok"); code != http.StatusOK || !strings.Contains(body, `"fine"`) {
			t.Errorf("after the failures: %d %s", code, body)
		}
		qv, err := eddy.Query[string, string](in.app, "values")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := qv.Get("p"); !errors.Is(err, serde.ErrPanicked) {
			t.Errorf("Get of a value the serde panics on: %v; want ErrPanicked", err)
		}
		var se *serde.Error
		if _, err := qv.All(); !errors.As(err, &se) || se.Serde != "Fragile" { // "e" comes first: its error
			t.Errorf("All over values the serde fails and panics on: %v; want a Fragile serde.Error", err)
		}
		// A null key (JSON null for a Nullable key serde) is no key a store holds.
		if code, _, body := get(t, base+"/stores/byPoint/keys/null"); code != http.StatusBadRequest {
			t.Errorf("null key: %d %s; want 400", code, body)
		}
		if code, _, body := get(t, base+"/stores/byPoint/keys/"+url.PathEscape(`{"X":1}`)); code != http.StatusNotFound {
			t.Errorf("absent key: %d %s; want 404", code, body)
		}
		q, err := eddy.Query[*point, string](in.app, "byPoint")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := q.Get(nil); !errors.Is(err, statestore.ErrNullKey) {
			t.Errorf("Get(nil): %v; want ErrNullKey", err)
		}
		if _, _, err := q.Owner(nil); !errors.Is(err, statestore.ErrNullKey) {
			t.Errorf("Owner(nil): %v; want ErrNullKey", err)
		}
		if _, failed := in.exited(); failed {
			t.Fatal("the application stopped")
		}
	})
}
