package eddy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// served is an instance whose Handler is served on its AdvertisedAddr.
type served struct {
	*instance
	base string
	reg  *prometheus.Registry
}

func startServed(t *testing.T, e *wcEnv, tune ...func(*eddy.Config)) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.AdvertisedAddr = ln.Addr().String()
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	for _, f := range tune {
		f(&cfg)
	}
	in := start(t, e.topo, cfg)
	srv := &http.Server{Handler: in.app.Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &served{instance: in, base: "http://" + ln.Addr().String(), reg: reg}
}

func get(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	return do(t, http.MethodGet, u, nil, "")
}

// scrape reads /metrics and returns each sample as "name{labels}" → value, labels
// sorted, application_id left out.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, _, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "application_id" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum{"+strings.Join(labels, ",")+"}"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// sum adds the samples of a metric whose labels contain every given label.
func sum(samples map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for k, v := range samples {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

func TestMetricsHealthAndTopologyEndpoints(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		s := startServed(t, e)
		waitFor(t, time.Minute, "readiness", func() (bool, error) {
			code, _, _ := get(t, s.base+"/readyz")
			return code == http.StatusOK, nil
		})
		if code, _, body := get(t, s.base+"/healthz"); code != http.StatusOK || !strings.Contains(body, "running") {
			t.Fatalf("/healthz: %d %s", code, body)
		}
		e.produce(t, 200)
		e.waitCounts(t, time.Minute, "the counts")
		waitFor(t, time.Minute, "the metrics to see the records", func() (bool, error) {
			m := scrape(t, s.base)
			return sum(m, "eddy_records_processed_total") >= 200, nil
		})
		first := scrape(t, s.base)
		checks := []struct {
			name   string
			labels []string
			min    float64
		}{
			{"eddy_records_processed_total", nil, 200 + 200*13}, // lines, then words through the repartition
			{"eddy_process_latency_seconds_count", nil, 1},
			{"eddy_commits_total", nil, 1},
			{"eddy_commit_latency_seconds_count", nil, 1},
			{"eddy_store_flush_keys_count", nil, 1},
			{"eddy_rebalances_total", nil, 1},
			{"eddy_state", []string{"state=running"}, 1},
			{"eddy_tasks", []string{"state=running"}, 8},
		}
		for _, ch := range checks {
			if got := sum(first, ch.name, ch.labels...); got < ch.min {
				t.Errorf("%s%v = %v, want at least %v", ch.name, ch.labels, got, ch.min)
			}
		}
		// Every worker commit times each of its phases once (issue 25 item 3); a scrape
		// may fall between two phases' observations of one commit.
		commitsTimed := sum(first, "eddy_commit_phase_seconds_count", "phase=prepare")
		for _, phase := range []string{"prepare", "flush", "commit", "stores"} {
			n := sum(first, "eddy_commit_phase_seconds_count", "phase="+phase)
			if n < 1 || n < commitsTimed-1 || n > commitsTimed {
				t.Errorf("eddy_commit_phase_seconds_count{phase=%q} = %v, want at least 1 and as many as for prepare (%v, or one fewer)", phase, n, commitsTimed)
			}
		}
		if got := sum(first, "eddy_commit_phase_seconds_sum", "phase=commit"); got <= 0 {
			t.Errorf("eddy_commit_phase_seconds_sum{phase=commit} = %v, want > 0", got)
		}
		if got := sum(first, "eddy_state", "state=failed"); got != 0 {
			t.Errorf("eddy_state{state=failed} = %v", got)
		}
		for k := range first {
			for word := range e.want {
				if len(word) < 3 { // digits would match partition labels
					continue
				}
				if strings.Contains(k, "="+word+",") || strings.Contains(k, "="+word+"}") {
					t.Errorf("a metric carries a record key: %s", k)
				}
			}
		}
		// The values move as records flow.
		e.produce(t, 100)
		waitFor(t, time.Minute, "the metrics to move", func() (bool, error) {
			m := scrape(t, s.base)
			return sum(m, "eddy_records_processed_total") >= sum(first, "eddy_records_processed_total")+100 &&
				sum(m, "eddy_commits_total") > sum(first, "eddy_commits_total"), nil
		})

		if code, _, body := get(t, s.base+"/topology"); code != http.StatusOK || body != e.topo.Describe() {
			t.Errorf("/topology: %d\n%s", code, body)
		}
		if code, _, body := get(t, s.base+"/topology?format=dot"); code != http.StatusOK || body != e.topo.DescribeDOT() {
			t.Errorf("/topology?format=dot: %d", code)
		}
		if code, _, body := get(t, s.base+"/topology?format=mermaid"); code != http.StatusOK || body != e.topo.DescribeMermaid() {
			t.Errorf("/topology?format=mermaid: %d", code)
		}
		if code, _, _ := get(t, s.base+"/topology?format=png"); code != http.StatusBadRequest {
			t.Errorf("/topology?format=png: %d, want 400", code)
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		if got := s.app.State(); got != eddy.StateStopped {
			t.Errorf("state after stop: %s", got)
		}
		if code, _, _ := get(t, s.base+"/healthz"); code != http.StatusServiceUnavailable {
			t.Errorf("/healthz after stop: %d, want 503", code)
		}
	})
}

func TestInteractiveQueriesAcrossInstances(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		a := startServed(t, e)
		b := startServed(t, e)
		e.produce(t, 300)
		e.waitCounts(t, time.Minute, "the counts")
		waitFor(t, time.Minute, "both instances ready with 4 tasks each", func() (bool, error) {
			ca, _, _ := get(t, a.base+"/readyz")
			cb, _, _ := get(t, b.base+"/readyz")
			return ca == 200 && cb == 200 && len(a.app.Tasks()) == 4 && len(b.app.Tasks()) == 4, nil
		})
		forwarded := 0
		for word, want := range e.want {
			// Every word through instance a: local, or forwarded to b.
			code, h, body := get(t, a.base+"/stores/counts/keys/"+url.PathEscape(word))
			if code != http.StatusOK {
				t.Fatalf("query %q: %d %s", word, code, body)
			}
			var got struct {
				Store, Key string
				Value      int64
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("query %q: %v in %s", word, err, body)
			}
			if got.Value != want || got.Key != word || got.Store != "counts" {
				t.Errorf("query %q: %+v, want count %d", word, got, want)
			}
			if h.Get("X-Eddy-Served-By") != "" {
				forwarded++
			}
		}
		if forwarded == 0 || forwarded == len(e.want) {
			t.Errorf("%d of %d queries were forwarded; with two instances some should be, not all", forwarded, len(e.want))
		}
		if code, _, _ := get(t, a.base+"/stores/counts/keys/no-such-word"); code != http.StatusNotFound {
			t.Errorf("missing key: %d, want 404", code)
		}
		if code, _, _ := get(t, a.base+"/stores/nope/keys/x"); code != http.StatusNotFound {
			t.Errorf("unknown store: %d, want 404", code)
		}

		// The typed API: local keys answer, the others name their owner.
		qa, err := eddy.Query[string, int64](a.app, wordcount.StoreName)
		if err != nil {
			t.Fatal(err)
		}
		local := 0
		for word, want := range e.want {
			n, ok, err := qa.Get(word)
			var nl *eddy.NotLocalError
			switch {
			case err == nil:
				local++
				if !ok || n != want {
					t.Errorf("Get(%q) = %d %v, want %d", word, n, ok, want)
				}
			case errors.As(err, &nl):
				if nl.Owner != strings.TrimPrefix(b.base, "http://") {
					t.Errorf("Get(%q): owner %q, want b at %s", word, nl.Owner, b.base)
				}
			default:
				t.Errorf("Get(%q): %v", word, err)
			}
		}
		all, err := qa.All()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != local {
			t.Errorf("All() on a: %d entries, but %d keys answered locally", len(all), local)
		}
		if _, err := eddy.Query[int64, int64](a.app, wordcount.StoreName); err == nil {
			t.Error("Query with the wrong key type succeeded")
		}
	})
}

// Before the application runs, queries and readiness answer 503 with Retry-After.
func TestQueriesBeforeRunAreNotReady(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: "q", Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := http.Server{Handler: app.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	for _, path := range []string{"/readyz", "/stores/counts/keys/hello"} {
		code, h, body := get(t, base+path)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("%s before Run: %d %q, Retry-After %q; want 503 with Retry-After", path, code, body, h.Get("Retry-After"))
		}
	}
	if code, _, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz before Run: %d", code)
	}
	if _, err := eddy.Query[string, int64](app, "counts"); err != nil {
		t.Fatal(err)
	}
	q, _ := eddy.Query[string, int64](app, "counts")
	if _, _, err := q.Get("x"); !errors.Is(err, eddy.ErrNotReady) {
		t.Errorf("Get before Run: %v, want ErrNotReady", err)
	}
	_ = context.Background
	_ = fmt.Sprint
}
