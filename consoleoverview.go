package eddy

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// overview is the data of the overview page.
type overview struct {
	page
	Instances                      []instanceView
	Tasks, Running, Restoring      int
	Lag                            int64
	Rate                           float64
	Dropped, DeadLettered, Skipped int64
	Q, StateFilter, Group          string
	Size, PageNo, Pages, Matched   int
	States                         []string
	Groups                         []taskGroup
	Prev, Next                     string
}

// taskGroup is the tasks of one instance or sub-topology, on the page shown.
type taskGroup struct {
	Name    string
	Matched int // tasks of the group that match, on every page
	Lag     int64
	Rate    float64
	Rows    []taskView
}

const (
	defaultPageSize = 100
	maxPageSize     = 2000
)

func (c *console) serveOverview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "overview", buildOverview(c.page("overview"), c.instances(r), r.URL.Query()))
}

// buildOverview filters, groups and pages the tasks of instances as the query q says
// (q: search text, state, group, size, page).
func buildOverview(pg page, instances []instanceView, q url.Values) overview {
	o := newOverview(pg, q)
	o.Instances = instances
	all := o.tally()
	o.sortByGroup(all)
	o.Matched = len(all)
	o.Pages = max(1, (len(all)+o.Size-1)/o.Size)
	o.PageNo = min(o.PageNo, o.Pages)
	o.groupPage(all)
	if o.PageNo > 1 {
		o.Prev = o.pageLink(o.PageNo - 1)
	}
	if o.PageNo < o.Pages {
		o.Next = o.pageLink(o.PageNo + 1)
	}
	return o
}

// newOverview reads the overview's query: an unknown group is by instance, a size out
// of range the default or the largest, a page below 1 the first.
func newOverview(pg page, q url.Values) overview {
	o := overview{page: pg, Q: strings.TrimSpace(q.Get("q")), StateFilter: q.Get("state"), Group: q.Get("group")}
	if o.Group != "subtopology" && o.Group != "none" {
		o.Group = "instance"
	}
	o.Size, _ = strconv.Atoi(q.Get("size"))
	if o.Size <= 0 {
		o.Size = defaultPageSize
	}
	o.Size = min(o.Size, maxPageSize)
	o.PageNo, _ = strconv.Atoi(q.Get("page"))
	o.PageNo = max(o.PageNo, 1)
	return o
}

// tally adds up every task of every instance into the overview's totals and the
// states seen, and returns the tasks that match the search and state filter.
func (o *overview) tally() []taskView {
	var all []taskView
	states := map[string]bool{}
	for _, in := range o.Instances {
		for _, t := range in.Tasks {
			o.Tasks++
			states[t.State] = true
			switch t.State {
			case "running":
				o.Running++
			case "restoring":
				o.Restoring++
			}
			o.Lag += t.LagTotal()
			o.Rate += t.Rate
			o.Dropped += t.Dropped
			o.DeadLettered += t.DeadLettered
			o.Skipped += t.Skipped
			if matches(t, o.Q, o.StateFilter) {
				all = append(all, t)
			}
		}
	}
	o.States = slices.Sorted(func(yield func(string) bool) {
		for s := range states {
			if !yield(s) {
				return
			}
		}
	})
	return all
}

// groupOf names the group t is shown in.
func (o *overview) groupOf(t taskView) string {
	switch o.Group {
	case "subtopology":
		return "sub-topology " + strconv.Itoa(t.Subtopology)
	case "none":
		return ""
	}
	return t.Instance
}

// sortByGroup orders tasks by group (sub-topologies by number, not by name), then by
// sub-topology and partition.
func (o *overview) sortByGroup(all []taskView) {
	slices.SortStableFunc(all, func(x, y taskView) int {
		if gx, gy := o.groupOf(x), o.groupOf(y); gx != gy {
			if o.Group == "subtopology" {
				return x.Subtopology - y.Subtopology
			}
			return strings.Compare(gx, gy)
		}
		if x.Subtopology != y.Subtopology {
			return x.Subtopology - y.Subtopology
		}
		return int(x.Partition - y.Partition)
	})
}

// groupPage fills Groups with the groups that have a task on the page shown, with
// those tasks as rows; a group's totals count its matching tasks on every page.
func (o *overview) groupPage(all []taskView) {
	from, to := (o.PageNo-1)*o.Size, min(o.PageNo*o.Size, len(all))
	byName := map[string]*taskGroup{}
	for i, t := range all {
		name := o.groupOf(t)
		g := byName[name]
		if g == nil {
			g = &taskGroup{Name: name}
			byName[name] = g
		}
		g.Matched++
		g.Lag += t.LagTotal()
		g.Rate += t.Rate
		if i >= from && i < to {
			if len(g.Rows) == 0 {
				o.Groups = append(o.Groups, taskGroup{Name: name})
			}
			g.Rows = append(g.Rows, t)
		}
	}
	for i := range o.Groups {
		o.Groups[i] = *byName[o.Groups[i].Name]
	}
}

// pageLink is the query of page p with the overview's filters, leaving out those at
// their defaults.
func (o *overview) pageLink(p int) string {
	v := url.Values{}
	for k, s := range map[string]string{"q": o.Q, "state": o.StateFilter} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if o.Group != "instance" {
		v.Set("group", o.Group)
	}
	if o.Size != defaultPageSize {
		v.Set("size", strconv.Itoa(o.Size))
	}
	v.Set("page", strconv.Itoa(p))
	return "?" + v.Encode()
}

// matches reports whether a task passes the overview's search (case-insensitive, in
// its task ID, instance, state and input topics) and state filter.
func matches(t taskView, q, state string) bool {
	if state != "" && t.State != state {
		return false
	}
	if q == "" {
		return true
	}
	q = strings.ToLower(q)
	for _, f := range []string{t.ID, t.Instance, t.State} {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	for _, l := range t.Lag {
		if strings.Contains(strings.ToLower(l.Topic), q) {
			return true
		}
	}
	return false
}
