package eddy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestStaleWindowQueriesFromStandby runs the views of the window query tests on two
// instances with one standby replica, 2 partitions: each runs one task and keeps a
// standby of the other's. On instance a, a user of b's task is not local to Fetch
// (ErrNotLocal) nor to a plain HTTP query (forwarded to b), but FetchStale,
// FindSessionsStale and ?stale=true answer from a's standby with its checkpoint and
// lag; FetchAllStale and FindAllStale (and ?stale=true on the routes of every key) read
// a's active task and its standby: every user's windows and sessions.
func TestStaleWindowQueriesFromStandby(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e, input := viewsApp(t, c, 2)
		standby := func(cfg *eddy.Config) { cfg.NumStandbyReplicas = 1 }
		a, bb := startServed(t, e, standby), startServed(t, e, standby)
		produceViews(t, c, input)
		waitFor(t, time.Minute, "both instances ready with a task each", func() (bool, error) {
			ca, _, _ := get(t, a.base+"/readyz")
			cb, _, _ := get(t, bb.base+"/readyz")
			return ca == 200 && cb == 200 && len(a.app.Tasks()) == 1 && len(bb.app.Tasks()) == 1, nil
		})
		qw, err := eddy.QueryWindows[string, int64](a.app, "per-minute")
		if err != nil {
			t.Fatal(err)
		}
		qs, err := eddy.QuerySessions[string, int64](a.app, "sessions")
		if err != nil {
			t.Fatal(err)
		}
		from, to := viewsT0, viewsT0.Add(time.Hour)
		// Every window and session from a's active task and its standby, which has read
		// its changelogs to the end.
		waitForState(t, 2*time.Minute, "a's active task and standby holding every window and session", func() (bool, string) {
			ws, wInfos, err1 := qw.FetchAllStale(from, to)
			ss, sInfos, err2 := qs.FindAllStale(from, to)
			return err1 == nil && err2 == nil && len(ws) == 2*viewUsers && len(ss) == 2*viewUsers &&
					caughtUpCopies(wInfos) && caughtUpCopies(sInfos),
				fmt.Sprintf("%d windows (%v) from %+v, %d sessions (%v) from %+v; want %d each, from two copies with no lag",
					len(ws), err1, wInfos, len(ss), err2, sInfos, 2*viewUsers)
		})
		bAddr := strings.TrimPrefix(bb.base, "http://")
		var remote []int
		for i := range viewUsers {
			user, n := fmt.Sprintf("u%02d", i), int64(i%3+1)
			ws, info, err := qw.BackwardFetchStale(user, from, to)
			if err != nil || len(ws) != 2 || ws[0].Value != 2 || ws[1].Value != n || ws[1].Key.Key != user || !ws[1].Key.Window.Start.Equal(viewsT0) {
				t.Fatalf("BackwardFetchStale(%s) = %+v, %v; want 2 then %d", user, ws, err, n)
			}
			ss, sInfo, err := qs.FindSessionsStale(user, from, to)
			if err != nil || len(ss) != 2 || ss[0].Value != n || ss[1].Value != 2 || sInfo.Task != info.Task || sInfo.Source != info.Source {
				t.Fatalf("FindSessionsStale(%s) = %+v, %+v, %v; want %d then 2 from the copy the windows came from (%+v)", user, ss, sInfo, err, n, info)
			}
			_, getErr := qw.Fetch(user, from, to)
			var nl *eddy.NotLocalError
			switch {
			case getErr == nil:
				if info.Source != eddy.SourceActive {
					t.Errorf("FetchStale(%s) of a's own task: %+v; want source active", user, info)
				}
			case errors.As(getErr, &nl) && nl.Owner == bAddr:
				remote = append(remote, i)
				if info.Source != eddy.SourceStandby || info.Task != nl.Task || info.Checkpoint <= 0 || info.LagRecords != 0 {
					t.Errorf("FetchStale(%s) of b's task %s: %+v; want source standby, that task, a checkpoint, no records behind", user, nl.Task, info)
				}
			default:
				t.Fatalf("Fetch(%s): %v; want the windows or ErrNotLocal naming b at %s", user, getErr, bAddr)
			}
		}
		if len(remote) == 0 || len(remote) == viewUsers {
			t.Fatalf("%d of %d users held by b's task; want some, not all", len(remote), viewUsers)
		}

		// HTTP: without stale a query of b's user goes to b; with stale=true a's standby
		// answers, saying so.
		user := fmt.Sprintf("u%02d", remote[0])
		path := a.base + "/stores/per-minute/windows/" + user
		if code, h, body := get(t, path); code != http.StatusOK || h.Get("X-Eddy-Served-By") != bAddr || strings.Contains(body, `"stale"`) {
			t.Errorf("plain window query of %s on a: %d, served by %q, %s; want 200 forwarded to b, no stale object", user, code, h.Get("X-Eddy-Served-By"), body)
		}
		code, h, body := get(t, path+"?stale=true")
		var one struct {
			windowsAnswer
			Stale *struct {
				Source     string
				Task       string
				Checkpoint *int64
				LagRecords int64 `json:"lag_records"`
			}
		}
		if err := json.Unmarshal([]byte(body), &one); err != nil || code != http.StatusOK || h.Get("X-Eddy-Served-By") != "" ||
			len(one.Windows) != 2 || one.Stale == nil || one.Stale.Source != "standby" || one.Stale.Checkpoint == nil || *one.Stale.Checkpoint <= 0 {
			t.Errorf("stale window query of %s on a: %d, served by %q, %s (%v); want 200 from a's standby, 2 windows, its checkpoint", user, code, h.Get("X-Eddy-Served-By"), body, err)
		}
		code, _, body = get(t, a.base+"/stores/sessions/sessions?stale=true")
		var all struct {
			windowsAnswer
			Stale []struct{ Source, Task string }
		}
		if err := json.Unmarshal([]byte(body), &all); err != nil || code != http.StatusOK || len(all.Sessions) != 2*viewUsers ||
			len(all.Stale) != 2 || all.Stale[0].Task != "0_0" || all.Stale[1].Task != "0_1" {
			t.Errorf("stale query of every session on a: %d %s (%v); want 200, all %d sessions, copies 0_0 and 0_1", code, body, err, 2*viewUsers)
		}
		if code, _, body := get(t, path+"?stale=1"); code != http.StatusBadRequest || !strings.Contains(body, "stale") {
			t.Errorf("stale=1: %d %s; want 400 naming the parameter", code, body)
		}
	})
}

// caughtUpCopies reports whether a query read two copies, neither behind.
func caughtUpCopies(infos []eddy.StaleInfo) bool {
	return len(infos) == 2 && !slices.ContainsFunc(infos, func(si eddy.StaleInfo) bool { return si.LagRecords != 0 })
}
