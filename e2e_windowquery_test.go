package eddy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// The views of the window query tests: user i views a page (i%3)+1 times in the first
// minute, 5 s apart from 0:05, and twice in the second (1:05, 1:10). Counted per minute
// and per session (gap 30 s): two windows and two sessions per user.
var viewsT0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const viewUsers = 20

func viewTimes(user int) []time.Duration {
	var ts []time.Duration
	for j := range user%3 + 1 {
		ts = append(ts, time.Duration(5*(j+1))*time.Second)
	}
	return append(ts, 65*time.Second, 70*time.Second)
}

// viewsApp creates the views' input topic of the given partitions and the application
// counting them per minute ("per-minute") and per session ("sessions").
func viewsApp(t *testing.T, c *kafkatest.Cluster, partitions int32) (e *wcEnv, input string) {
	t.Helper()
	appID, input := c.Unique("views"), c.Unique("views-in")
	if err := c.CreateTopic(ctxT(t), input, partitions, nil); err != nil {
		t.Fatal(err)
	}
	b := stream.NewBuilder()
	g := stream.From(b, serde.String(), serde.String(), []string{input}).GroupByKey(serde.String(), serde.String())
	// An hour of retention keeps the first minute queryable after the second.
	g.WindowedBy(window.Tumbling(time.Minute, 0)).Count(stream.Materialized("per-minute"), stream.Retention(time.Hour))
	g.WindowedBySession(window.Sessions(30*time.Second, 0)).Count(stream.Materialized("sessions"), stream.Retention(time.Hour))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return &wcEnv{c: c, appID: appID, topo: topo}, input
}

// produceViews writes every user's views (viewTimes) to input.
func produceViews(t *testing.T, c *kafkatest.Cluster, input string) {
	t.Helper()
	var msgs []*sarama.ProducerMessage
	for i := range viewUsers {
		for _, at := range viewTimes(i) {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: input, Key: sarama.StringEncoder(fmt.Sprintf("u%02d", i)),
				Value: sarama.StringEncoder("/home"), Timestamp: viewsT0.Add(at)})
		}
	}
	// In time order: with no grace, a view behind its partition's stream time by a
	// minute would be late.
	slices.SortStableFunc(msgs, func(x, y *sarama.ProducerMessage) int { return x.Timestamp.Compare(y.Timestamp) })
	if err := c.Produce(ctxT(t), input, msgs...); err != nil {
		t.Fatal(err)
	}
}

// windowJSON is a window of the HTTP answer.
type windowJSON struct {
	Key                string
	Start, End         int64
	StartTime, EndTime string
	Value              int64
}

type windowsAnswer struct {
	Store, Key string
	From, To   int64
	Windows    []windowJSON
	Sessions   []windowJSON
}

func TestWindowQueriesAcrossInstances(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e, input := viewsApp(t, c, 4)
		a, bb := startServed(t, e), startServed(t, e)
		produceViews(t, c, input)
		if err := c.WaitProcessed(ctxT(t), e.appID, input); err != nil {
			t.Fatal(err)
		}
		// A task writes its stores after its transaction committed, so the committed
		// offsets WaitProcessed saw can be ahead of what a query reads for a moment (CI on
		// ed97673 read no windows of u00 right after): wait until the two instances'
		// stores hold every window and session between them.
		waitFor(t, time.Minute, "both instances ready with 2 tasks each, every window stored", func() (bool, error) {
			ca, _, _ := get(t, a.base+"/readyz")
			cb, _, _ := get(t, bb.base+"/readyz")
			if ca != 200 || cb != 200 || len(a.app.Tasks()) != 2 || len(bb.app.Tasks()) != 2 {
				return false, nil
			}
			stored := 0
			for _, base := range []string{a.base, bb.base} {
				for _, path := range []string{"/stores/per-minute/windows", "/stores/sessions/sessions"} {
					code, _, body := get(t, base+path)
					var ans windowsAnswer
					if code != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil {
						return false, nil
					}
					stored += len(ans.Windows) + len(ans.Sessions)
				}
			}
			return stored == 4*viewUsers, nil
		})
		t0 := viewsT0.UnixMilli()
		answer := func(path string) (windowsAnswer, http.Header) {
			t.Helper()
			code, h, body := get(t, a.base+path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			var ans windowsAnswer
			if err := json.Unmarshal([]byte(body), &ans); err != nil {
				t.Fatalf("GET %s: %v in %s", path, err, body)
			}
			return ans, h
		}
		forwarded := 0
		for i := range viewUsers {
			user := fmt.Sprintf("u%02d", i)
			ans, h := answer(fmt.Sprintf("/stores/per-minute/windows/%s?from=%d&to=%d", user, t0, t0+120_000))
			want := []windowJSON{
				{user, t0, t0 + 60_000, "2024-05-01T12:00:00.000Z", "2024-05-01T12:01:00.000Z", int64(i%3 + 1)},
				{user, t0 + 60_000, t0 + 120_000, "2024-05-01T12:01:00.000Z", "2024-05-01T12:02:00.000Z", 2},
			}
			if !slices.Equal(ans.Windows, want) || ans.Key != user || ans.Store != "per-minute" || ans.From != t0 {
				t.Fatalf("windows of %s: %+v, want %+v", user, ans, want)
			}
			if h.Get("X-Eddy-Served-By") != "" {
				forwarded++
			}
			// Backward, from an RFC 3339 bound: the second minute alone, then both, newest first.
			ans, _ = answer("/stores/per-minute/windows/" + user + "?from=" + url.QueryEscape("2024-05-01T12:00:30Z") + "&backward=true")
			if !slices.Equal(ans.Windows, want[1:]) {
				t.Fatalf("windows of %s from 12:00:30: %+v, want %+v", user, ans.Windows, want[1:])
			}
			ans, _ = answer("/stores/per-minute/windows/" + user + "?backward=true")
			if len(ans.Windows) != 2 || ans.Windows[0] != want[1] || ans.Windows[1] != want[0] {
				t.Fatalf("windows of %s backward: %+v", user, ans.Windows)
			}
			ans, _ = answer("/stores/sessions/sessions/" + user)
			n := int64(i%3 + 1)
			wantS := []windowJSON{
				{user, t0 + 5_000, t0 + 5_000*n, rfc(t0 + 5_000), rfc(t0 + 5_000*n), n},
				{user, t0 + 65_000, t0 + 70_000, "2024-05-01T12:01:05.000Z", "2024-05-01T12:01:10.000Z", 2},
			}
			if !slices.Equal(ans.Sessions, wantS) {
				t.Fatalf("sessions of %s: %+v, want %+v", user, ans.Sessions, wantS)
			}
			// Sessions that overlap [1:00, 1:05]: the second.
			ans, _ = answer(fmt.Sprintf("/stores/sessions/sessions/%s?from=%d&to=%d", user, t0+60_000, t0+65_000))
			if !slices.Equal(ans.Sessions, wantS[1:]) {
				t.Fatalf("sessions of %s overlapping [1:00, 1:05]: %+v", user, ans.Sessions)
			}
		}
		if forwarded == 0 || forwarded == viewUsers {
			t.Errorf("%d of %d queries were forwarded; with two instances some should be, not all", forwarded, viewUsers)
		}

		// Every key: each instance answers its own partitions; together, every window once.
		seen := map[string]int{}
		for _, base := range []string{a.base, bb.base} {
			code, _, body := get(t, base+"/stores/per-minute/windows?to="+url.QueryEscape("2024-05-01T12:00:59Z"))
			var ans windowsAnswer
			if code != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil {
				t.Fatalf("all windows: %d %s", code, body)
			}
			for _, w := range ans.Windows {
				if w.Start != t0 {
					t.Errorf("all windows to 12:00:59 gave %+v", w)
				}
				seen[w.Key]++
			}
		}
		if len(seen) != viewUsers || slices.ContainsFunc(slices.Collect(mapValues(seen)), func(n int) bool { return n != 1 }) {
			t.Errorf("first-minute windows across both instances: %v, want each of %d users once", seen, viewUsers)
		}

		fwd, _ := answer("/stores/per-minute/windows")
		bwd, _ := answer("/stores/per-minute/windows?backward=true")
		slices.Reverse(bwd.Windows)
		if len(fwd.Windows) == 0 || !slices.Equal(fwd.Windows, bwd.Windows) || !slices.IsSortedFunc(fwd.Windows, func(x, y windowJSON) int { return int(x.Start - y.Start) }) {
			t.Errorf("all windows by start: %+v; backward, reversed: %+v", fwd.Windows, bwd.Windows)
		}

		// Errors say what is wrong.
		for _, tc := range []struct {
			path string
			code int
			says string
		}{
			{"/stores/per-minute/windows/u01?from=yesterday", 400, "from:"},
			{"/stores/per-minute/windows/u01?to=12:00", 400, "to:"},
			{"/stores/per-minute/windows/u01?from=5&to=4", 400, "from (5) is after to (4)"},
			{"/stores/per-minute/windows/u01?backward=maybe", 400, "backward:"},
			{"/stores/per-minute/keys/u01", 400, `store "per-minute" is a window store, not a key-value store`},
			{"/stores/per-minute/sessions/u01", 400, "/stores/per-minute/windows/{key}"},
			{"/stores/sessions/windows", 400, `store "sessions" is a session store, not a window store`},
			{"/stores/nope/windows/u01", 404, `no store "nope"`},
		} {
			code, _, body := get(t, a.base+tc.path)
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.code || !strings.Contains(e.Error, tc.says) {
				t.Errorf("GET %s: %d %s; want %d saying %q", tc.path, code, body, tc.code, tc.says)
			}
		}

		// The typed API.
		qw, err := eddy.QueryWindows[string, int64](a.app, "per-minute")
		if err != nil {
			t.Fatal(err)
		}
		local := 0
		for i := range viewUsers {
			user := fmt.Sprintf("u%02d", i)
			ws, err := qw.BackwardFetch(user, viewsT0, viewsT0.Add(time.Hour))
			if errors.Is(err, eddy.ErrNotLocal) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			local++
			if len(ws) != 2 || ws[0].Value != 2 || ws[1].Value != int64(i%3+1) || ws[1].Key.Key != user || !ws[1].Key.Window.Start.Equal(viewsT0) {
				t.Errorf("BackwardFetch(%s) = %+v", user, ws)
			}
		}
		all, err := qw.FetchAll(viewsT0, viewsT0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if local == 0 || local == viewUsers || len(all) != 2*local {
			t.Errorf("%d users local to a, FetchAll gave %d windows", local, len(all))
		}
		qs, err := eddy.QuerySessions[string, int64](a.app, "sessions")
		if err != nil {
			t.Fatal(err)
		}
		sessions, err := qs.FindAll(viewsT0, viewsT0.Add(time.Hour))
		if err != nil || len(sessions) != 2*local {
			t.Errorf("FindAll: %d sessions (%v), want %d", len(sessions), err, 2*local)
		}
		if _, err := eddy.Query[string, int64](a.app, "per-minute"); !errors.Is(err, eddy.ErrStoreKind) {
			t.Errorf("Query of a window store: %v, want ErrStoreKind", err)
		}
		if _, err := eddy.QueryWindows[string, int64](a.app, "sessions"); !errors.Is(err, eddy.ErrStoreKind) {
			t.Errorf("QueryWindows of a session store: %v, want ErrStoreKind", err)
		}
	})
}

func rfc(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}
