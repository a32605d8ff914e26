package eddy_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// staleAnswer is a key query's JSON answer with its "stale" object.
type staleAnswer struct {
	Key   string
	Value int64
	Error string
	Stale *struct {
		Source      string     `json:"source"`
		Task        string     `json:"task"`
		Checkpoint  *int64     `json:"checkpoint"`
		LagRecords  int64      `json:"lag_records"`
		CurrentAsOf *time.Time `json:"current_as_of"`
		LagSeconds  *float64   `json:"lag_seconds"`
	} `json:"stale"`
}

// TestStaleQueryFromStandby runs two word-count instances with one standby replica:
// each runs one of the two counting tasks and keeps a standby of the other's. On
// instance a, a key of b's task is not local to Get (ErrNotLocal naming b) nor to a
// plain HTTP query (forwarded to b), but GetStale and ?stale=true answer it from a's
// standby, saying so, with the standby's checkpoint and lag; a key of a's own task
// answers from the active task. ?stale= takes true or false only.
func TestStaleQueryFromStandby(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		standby := func(cfg *eddy.Config) { cfg.NumStandbyReplicas = 1 }
		a, b := startServed(t, e, standby), startServed(t, e, standby)
		e.produce(t, 200)
		e.waitCounts(t, 2*time.Minute, "the counts")
		qa, err := eddy.Query[string, int64](a.app, wordcount.StoreName)
		if err != nil {
			t.Fatal(err)
		}
		// The standby has read every count once a stale read of each key gives its
		// final count with no lag left.
		waitFor(t, time.Minute, "a's standby holding every count of b's task", func() (bool, error) {
			for word, want := range e.want {
				n, ok, info, err := qa.GetStale(word)
				if err != nil || !ok || n != want || info.LagRecords != 0 {
					return false, nil
				}
			}
			return true, nil
		})
		began := time.Now()
		bAddr := strings.TrimPrefix(b.base, "http://")
		var fromStandby []string
		for word, want := range e.want {
			n, ok, info, err := qa.GetStale(word)
			if err != nil || !ok || n != want {
				t.Fatalf("GetStale(%q) = %d %v, %v; want %d", word, n, ok, err, want)
			}
			_, _, getErr := qa.Get(word)
			var nl *eddy.NotLocalError
			switch {
			case getErr == nil:
				if info.Source != eddy.SourceActive || info.LagRecords != 0 {
					t.Errorf("GetStale(%q) of a's own task: %+v; want source active, no lag", word, info)
				}
			case errors.As(getErr, &nl) && nl.Owner == bAddr:
				fromStandby = append(fromStandby, word)
				lag, known := info.Lag()
				if info.Source != eddy.SourceStandby || info.Task != nl.Task || info.Checkpoint <= 0 || info.LagRecords != 0 ||
					!known || lag <= 0 || lag > time.Minute {
					t.Errorf("GetStale(%q) of b's task %s: %+v (lag %v, known %v); want source standby, that task, a checkpoint, no records behind, a lag in time under a minute",
						word, nl.Task, info, lag, known)
				}
			default:
				t.Fatalf("Get(%q): %v; want the value or ErrNotLocal naming b at %s", word, getErr, bAddr)
			}
		}
		if len(fromStandby) == 0 || len(fromStandby) == len(e.want) {
			t.Fatalf("%d of %d words held by b's task; want some, not all", len(fromStandby), len(e.want))
		}

		// HTTP: without stale the query goes to b, with stale=true a's standby answers.
		word := fromStandby[0]
		path := a.base + "/stores/counts/keys/" + url.PathEscape(word)
		code, h, body := get(t, path)
		if code != http.StatusOK || h.Get("X-Eddy-Served-By") != bAddr || strings.Contains(body, `"stale"`) {
			t.Errorf("plain query of %q on a: %d, served by %q, %s; want 200 forwarded to b with no stale object", word, code, h.Get("X-Eddy-Served-By"), body)
		}
		code, h, body = get(t, path+"?stale=true")
		var ans staleAnswer
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			t.Fatalf("stale query of %q: %v in %s", word, err, body)
		}
		if code != http.StatusOK || h.Get("X-Eddy-Served-By") != "" || ans.Value != e.want[word] || ans.Stale == nil ||
			ans.Stale.Source != "standby" || ans.Stale.Checkpoint == nil || *ans.Stale.Checkpoint <= 0 || ans.Stale.LagRecords != 0 ||
			ans.Stale.LagSeconds == nil || *ans.Stale.LagSeconds > time.Since(began).Seconds()+60 {
			t.Errorf("stale query of %q on a: %d, served by %q, %s; want 200 from a's standby with its checkpoint and lag", word, code, h.Get("X-Eddy-Served-By"), body)
		}
		code, _, body = get(t, a.base+"/stores/counts/keys/no-such-word?stale=true")
		if err := json.Unmarshal([]byte(body), &ans); err != nil || code != http.StatusNotFound || ans.Stale == nil {
			t.Errorf("stale query of a missing key: %d %s; want 404 saying which copy lacked it", code, body)
		}
		if code, _, body := get(t, path+"?stale=yes"); code != http.StatusBadRequest || !strings.Contains(body, "stale") {
			t.Errorf("stale=yes: %d %s; want 400 naming the parameter", code, body)
		}

		// A key scan covers a's own partition, and with stale=true its standby's too.
		scan := func(query string) (entries map[string]int64, sources []string) {
			t.Helper()
			code, _, body := get(t, a.base+"/stores/counts/keys?limit=10000"+query)
			var ans struct {
				Entries []struct {
					Key   string
					Value int64
				}
				Stale []struct{ Source, Task string }
			}
			if err := json.Unmarshal([]byte(body), &ans); err != nil || code != http.StatusOK {
				t.Fatalf("scan%s: %d %s (%v)", query, code, body, err)
			}
			entries = map[string]int64{}
			for _, e := range ans.Entries {
				entries[e.Key] = e.Value
			}
			for _, c := range ans.Stale {
				sources = append(sources, c.Source+" "+c.Task)
			}
			return entries, sources
		}
		plain, sources := scan("")
		if len(plain) != len(e.want)-len(fromStandby) || sources != nil {
			t.Errorf("plain scan on a: %d keys, copies %v; want the %d of a's own task, no stale list", len(plain), sources, len(e.want)-len(fromStandby))
		}
		all, sources := scan("&stale=true")
		if !maps.Equal(all, e.want) || len(sources) != 2 || !slices.Contains(sources, "standby "+qaTask(t, qa, fromStandby[0])) {
			t.Errorf("stale scan on a: %d keys (want all %d), copies %v; want a's active task and its standby of b's", len(all), len(e.want), sources)
		}

		// In Go: All has a's own task's keys, AllStale every key from a's active task and
		// its standby, and RangeStale the words of a range from both.
		own, err := qa.All()
		if err != nil || len(own) != len(e.want)-len(fromStandby) {
			t.Errorf("All on a: %d pairs, %v; want the %d of a's own task", len(own), err, len(e.want)-len(fromStandby))
		}
		pairs, infos, err := qa.AllStale()
		got := map[string]int64{}
		for _, kv := range pairs {
			got[kv.Key] = kv.Value
		}
		if err != nil || !maps.Equal(got, e.want) || len(infos) != 2 || infos[0].Task.Partition != 0 ||
			!slices.ContainsFunc(infos, func(si eddy.StaleInfo) bool {
				return si.Source == eddy.SourceStandby && si.Task.String() == qaTask(t, qa, fromStandby[0]) && si.Checkpoint > 0
			}) {
			t.Errorf("AllStale on a: %d pairs (want all %d), %+v, %v; want a's active task and its standby of b's, in task order", len(got), len(e.want), infos, err)
		}
		words := slices.Sorted(maps.Keys(e.want))
		from, to := words[1], words[len(words)-2]
		pairs, infos, err = qa.RangeStale(from, to)
		if err != nil || len(pairs) != len(words)-3 || pairs[0].Key != from || len(infos) != 2 {
			t.Errorf("RangeStale(%q, %q) on a: %d pairs, %+v, %v; want the %d words in [from, to) from both copies", from, to, len(pairs), infos, err, len(words)-3)
		}
	})
}

// qaTask returns the task of word (held by another instance).
func qaTask(t *testing.T, q *eddy.QueryableStore[string, int64], word string) string {
	t.Helper()
	var nl *eddy.NotLocalError
	if _, _, err := q.Get(word); !errors.As(err, &nl) {
		t.Fatalf("Get(%q): %v; want ErrNotLocal", word, err)
	}
	return nl.Task.String()
}
