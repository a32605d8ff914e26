package eddy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// consolePaths are the console's routes, each of which must sit behind Authorize.
var consolePaths = []string{"/ui/", "/ui/topology", "/ui/topology.dot", "/ui/stores", "/ui/stores?store=counts&op=get&key=x", "/ui/api/local", "/ui/static/console.js", "/ui/static/vendor/graphviz.js"}

func TestConsoleIsOffUnlessEnabled(t *testing.T) {
	base := serve(t, &http.Server{Handler: idleApp(t).Handler()})
	for _, p := range consolePaths {
		if code, _, body := get(t, base+p); code != http.StatusNotFound {
			t.Errorf("GET %s without HandlerOptions.Console: %d %.80s; want 404", p, code, body)
		}
	}
}

func TestConsoleAccessControl(t *testing.T) {
	base := serve(t, &http.Server{Handler: idleApp(t).HandlerWith(eddy.HandlerOptions{Console: true, Authorize: authorize})})
	good := http.Header{"Authorization": {token}}
	bad := http.Header{"Authorization": {"Bearer guess"}}
	for _, p := range consolePaths {
		for _, tc := range []struct {
			header http.Header
			want   int
		}{{nil, http.StatusUnauthorized}, {bad, http.StatusForbidden}, {good, http.StatusOK}} {
			code, hdr, body := do(t, "GET", base+p, tc.header, "")
			if code != tc.want {
				t.Errorf("GET %s with %v: %d %.80s; want %d", p, tc.header, code, body, tc.want)
			}
			if code == http.StatusOK && strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
				if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
					t.Errorf("GET %s: Content-Security-Policy %q; want only the console's own files, nothing inline", p, csp)
				}
			}
		}
	}
}

// TestConsoleWithoutJavaScript reads the console's pages as a browser without script
// would, from a word count running on the embedded broker: every table is in the HTML
// the server sends, and search, grouping, paging and the store browser work through
// plain links and forms.
func TestConsoleWithoutJavaScript(t *testing.T) {
	c := kafkatest.Embedded(t)
	e := newWordCount(t, c, 4)
	s := startConsole(t, e, eddy.HandlerOptions{})
	waitFor(t, time.Minute, "the instance to run", func() (bool, error) { return s.app.State() == eddy.StateRunning, nil })
	e.produce(t, 100)
	e.waitCounts(t, time.Minute, "the counts")

	// The figures come from the tasks themselves, with no Prometheus registry
	// configured (Config.Metrics is nil here).
	code, _, js := get(t, s.base+"/ui/api/local")
	var local struct {
		Tasks []struct {
			ID         string    `json:"id"`
			Processed  int64     `json:"processed"`
			Commits    int64     `json:"commits"`
			LastCommit time.Time `json:"lastCommit"`
		} `json:"tasks"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(js), &local) != nil || len(local.Tasks) != 8 {
		t.Fatalf("/ui/api/local: %d %s", code, js)
	}
	for _, tk := range local.Tasks {
		if tk.Processed == 0 || tk.Commits == 0 || tk.LastCommit.IsZero() {
			t.Errorf("task %s reports %d records processed, %d commits, last at %v; want some of each", tk.ID, tk.Processed, tk.Commits, tk.LastCommit)
		}
	}

	// Records through each node: 100 lines into the source and the splitter, their
	// words into the sink, the repartition source and the counter, and one count per
	// word out (no commit failed, so nothing was replayed).
	words := int64(0)
	for _, n := range e.want {
		words += n
	}
	wantNodes := map[string]int64{"lines": 100, "split": 100, "words-sink": words, "words": words, "count": words, "output": words}
	waitFor(t, 10*time.Second, fmt.Sprintf("records per node %v", wantNodes), func() (bool, error) {
		_, _, js := get(t, s.base+"/ui/api/local")
		var v struct {
			NodeRecords map[string]int64 `json:"nodeRecords"`
		}
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			return false, err
		}
		return maps.Equal(v.NodeRecords, wantNodes), nil
	})
	if _, _, dot := get(t, s.base+"/ui/topology.dot"); !strings.Contains(dot, `label="Processor\ncount\n`) || !strings.Contains(dot, "/s\"") {
		t.Errorf("the graph's nodes are not labelled with their rates:\n%s", dot)
	}

	rows := regexp.MustCompile(`<tr data-task="([0-9_]+)">`)
	tasks := func(path string) []string {
		t.Helper()
		code, hdr, body := get(t, s.base+path)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s %.200s", path, code, hdr.Get("Content-Type"), body)
		}
		var ids []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	var want []string
	for _, id := range s.app.Tasks() {
		want = append(want, id.String())
	}
	slices.Sort(want)
	if got := tasks("/ui/"); !slices.Equal(got, want) {
		t.Errorf("the overview lists tasks %v; want this instance's %v", got, want)
	}
	if got := tasks("/ui/?q=1_"); !slices.Equal(got, []string{"1_0", "1_1", "1_2", "1_3"}) {
		t.Errorf("searching 1_ lists %v; want sub-topology 1's four tasks", got)
	}
	if got := tasks("/ui/?q=" + e.input); !slices.Equal(got, []string{"0_0", "0_1", "0_2", "0_3"}) {
		t.Errorf("searching the input topic lists %v; want the four tasks reading it", got)
	}
	if got := tasks("/ui/?size=3&page=3"); !slices.Equal(got, []string{"1_2", "1_3"}) {
		t.Errorf("page 3 of 3 per page lists %v; want [1_2 1_3]", got)
	}
	_, _, body := get(t, s.base+"/ui/?size=3&page=2&group=subtopology")
	for _, w := range []string{`rel="prev"`, `rel="next"`, "sub-topology 0", "sub-topology 1", `data-topic="` + e.input + `"`} {
		if !strings.Contains(body, w) {
			t.Errorf("page 2 of the overview grouped by sub-topology lacks %q", w)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
		t.Errorf("the overview has inline script or style, which the console's CSP refuses")
	}

	word := sortedKeys(e.want)[0]
	// The store is written just after its transaction commits: the output can be read
	// a moment before the store has the last count.
	waitFor(t, 10*time.Second, fmt.Sprintf("the store browser to show %q = %d", word, e.want[word]), func() (bool, error) {
		_, _, body := get(t, s.base+"/ui/stores?store=counts&op=get&key="+word)
		return strings.Contains(body, fmt.Sprintf(`<td data-label="Value" class="value"><code>%d</code>`, e.want[word])), nil
	})
	_, _, body = get(t, s.base+"/ui/stores?store=counts&op=all&limit=3")
	if n := strings.Count(body, `<td data-label="Key">`); n != 3 || !strings.Contains(body, "more matched") {
		t.Errorf("listing every key with limit 3 shows %d rows (want 3) or does not say more matched", n)
	}
	_, _, body = get(t, s.base+"/ui/stores?store=counts&op=get&key=")
	if !strings.Contains(body, `class="error"`) {
		t.Errorf("a lookup without a key shows no error")
	}

	// The key scan route under the store browser.
	var wantW []string
	for _, w := range sortedKeys(e.want) {
		if strings.HasPrefix(w, "w") {
			wantW = append(wantW, fmt.Sprintf("%s=%d", w, e.want[w]))
		}
	}
	var gotW []string
	for retry := time.Now().Add(10 * time.Second); ; {
		code, _, js := get(t, s.base+"/stores/counts/keys?prefix=w")
		var scan struct {
			Entries []struct {
				Key   string `json:"key"`
				Value int64  `json:"value"`
			} `json:"entries"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(js), &scan) != nil {
			t.Fatalf("prefix scan: %d %s", code, js)
		}
		gotW = gotW[:0]
		for _, en := range scan.Entries {
			gotW = append(gotW, fmt.Sprintf("%s=%d", en.Key, en.Value))
		}
		// As above, a store may lag its output for a moment.
		if slices.Equal(gotW, wantW) || time.Now().After(retry) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(gotW, wantW) {
		t.Errorf("prefix scan w lists %v; want %v", gotW, wantW)
	}
	// A second instance with an empty state directory restores the store of the tasks
	// it takes over from the changelog: the console shows records done of total.
	s2 := startConsole(t, e, eddy.HandlerOptions{})
	waitFor(t, time.Minute, "a finished restore on the second instance", func() (bool, error) {
		code, _, js := get(t, s2.base+"/ui/api/local")
		var local struct {
			Tasks []struct {
				ID       string `json:"id"`
				Restores []struct {
					Store       string
					Done, Total int64
				} `json:"restores"`
			} `json:"tasks"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(js), &local) != nil {
			return false, nil
		}
		for _, tk := range local.Tasks {
			for _, r := range tk.Restores {
				if r.Store == "counts" && r.Total > 0 && r.Done == r.Total {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if _, _, body := get(t, s2.base+"/ui/"); !regexp.MustCompile(`<progress max="100" value="100">100%</progress> (\d+)/(\d+)`).MatchString(body) {
		t.Errorf("the second instance's overview shows no finished restore")
	}

	for path, want := range map[string]int{
		"/stores/counts/keys?limit=0":             http.StatusBadRequest,
		"/stores/counts/keys?prefix=a&from=b":     http.StatusBadRequest,
		"/stores/nope/keys":                       http.StatusNotFound,
		"/stores/counts/keys?from=a&to=z&limit=2": http.StatusOK,
	} {
		// The second instance's join moved tasks: the first answers 503 while its kept
		// tasks restart (a run at load 40 got one for the scan).
		var code int
		var body string
		waitFor(t, 30*time.Second, "GET "+path+" answered by a ready store", func() (bool, error) {
			code, _, body = get(t, s.base+path)
			return code != http.StatusServiceUnavailable, nil
		})
		if code != want {
			t.Errorf("GET %s: %d %s; want %d", path, code, body, want)
		}
	}
}

// TestConsoleStoreBrowserWindows: the store browser of one instance shows the windows
// and sessions of the whole application, from two instances on the embedded broker: a
// key's windows through the routed window query, and every key's windows and sessions
// gathered from both instances.
func TestConsoleStoreBrowserWindows(t *testing.T) {
	c := kafkatest.Embedded(t)
	e, input := viewsApp(t, c, 4)
	a, bb := startConsole(t, e, eddy.HandlerOptions{}), startConsole(t, e, eddy.HandlerOptions{})
	waitFor(t, time.Minute, "both instances running with tasks of their own", func() (bool, error) {
		return a.app.State() == eddy.StateRunning && bb.app.State() == eddy.StateRunning && len(a.app.Tasks()) > 0 && len(bb.app.Tasks()) > 0, nil
	})
	produceViews(t, c, input)
	rowRe := regexp.MustCompile(`<tr><td data-label="Key"><code>([^<]*)</code></td><td data-label="Start">([^<]*)</td><td data-label="End">[^<]*</td><td data-label="Value" class="value"><code>([^<]*)</code></td><td data-label="Answered by"><code>([^<]*)</code>`)
	type row struct{ key, start, value, by string }
	rows := func(path string) []row {
		t.Helper()
		code, _, body := get(t, a.base+path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		var out []row
		for _, m := range rowRe.FindAllStringSubmatch(body, -1) {
			out = append(out, row{m[1], m[2], m[3], m[4]})
		}
		return out
	}
	waitFor(t, time.Minute, "every user's two windows on the first instance's page", func() (bool, error) {
		return len(rows("/ui/stores?store=per-minute&op=all")) == 2*viewUsers, nil
	})
	by := map[string]bool{}
	all := rows("/ui/stores?store=per-minute&op=all")
	for i, r := range all {
		by[r.by] = true
		// Merged from both instances as a window query of every key orders them: by
		// start, then key.
		if i > 0 && (r.start < all[i-1].start || r.start == all[i-1].start && r.key < all[i-1].key) {
			t.Errorf("every key's windows: %v comes after %v", r, all[i-1])
		}
	}
	if !by[strings.TrimPrefix(a.base, "http://")] || !by[strings.TrimPrefix(bb.base, "http://")] {
		t.Errorf("every key's windows were answered by %v; want both instances", by)
	}
	if got := rows("/ui/stores?store=sessions&op=all"); len(got) != 2*viewUsers {
		t.Errorf("every key's sessions: %d rows; want %d", len(got), 2*viewUsers)
	}
	// u02 viewed 3 times in the first minute and twice in the second.
	got := rows("/ui/stores?store=per-minute&op=key&key=u02")
	if len(got) != 2 || got[0].value != "3" || got[1].value != "2" || got[0].start != "2024-05-01T12:00:00.000Z" {
		t.Errorf("u02's windows on the page: %v; want counts 3 (from 12:00) and 2", got)
	}
}
