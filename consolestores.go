package eddy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/eddy-streams/eddy/internal/graph"
)

// The store browser asks the handler's own query routes, so it answers as they do:
// a key (or the windows of a key) held by another instance is forwarded to it once;
// a scan, which each instance answers from its own partitions, is asked of every
// instance of the group and merged.

type storeOption struct {
	Name, Kind string
	Global     bool
}

type storeRow struct {
	Key, Start, End, Value, ServedBy string
}

type storesPage struct {
	page
	Stores                       []storeOption
	Store, Kind, Op              string
	Key, From, To, Prefix, Limit string
	Ran                          bool
	Error                        string
	Warnings                     []string
	Rows                         []storeRow
	Truncated, Windowed          bool
	Query                        string // the query routes asked, for an operator's curl
}

func (c *console) serveStores(w http.ResponseWriter, r *http.Request) {
	a := c.h.app
	q := r.URL.Query()
	p := storesPage{page: c.page("stores"), Store: q.Get("store"), Op: q.Get("op"),
		Key: q.Get("key"), From: q.Get("from"), To: q.Get("to"), Prefix: q.Get("prefix"), Limit: q.Get("limit")}
	for _, st := range a.g.StoreOrder {
		kind := st.Kind
		if kind == graph.KindKeyValue {
			kind = "key-value"
		}
		p.Stores = append(p.Stores, storeOption{Name: st.Name, Kind: kind, Global: st.Global})
	}
	st, ok := a.g.Stores[p.Store]
	if !ok {
		if p.Store != "" {
			p.Error = fmt.Sprintf("no store %q", p.Store)
		}
		c.render(w, r, "stores", p)
		return
	}
	p.Kind = st.Kind
	p.Windowed = st.Kind != graph.KindKeyValue
	p.Ran = true
	if err := c.runStoreQuery(r, st, &p); err != nil {
		p.Error = err.Error()
	}
	c.render(w, r, "stores", p)
}

// runStoreQuery asks the query routes what the form says and fills p's rows.
func (c *console) runStoreQuery(r *http.Request, st *graph.Store, p *storesPage) error {
	if st.Kind == graph.KindKeyValue {
		return c.runKeyValueQuery(r, st, p)
	}
	return c.runWindowQuery(r, st, p)
}

// runKeyValueQuery looks a key up (op get, the default) or scans the store (range,
// prefix, all).
func (c *console) runKeyValueQuery(r *http.Request, st *graph.Store, p *storesPage) error {
	v := url.Values{}
	switch p.Op {
	case "", "get":
		p.Op = "get"
		return c.getKey(r, st, p)
	case "range":
		setNonEmpty(v, "from", p.From)
		setNonEmpty(v, "to", p.To)
	case "prefix":
		setNonEmpty(v, "prefix", p.Prefix)
	case "all":
	default:
		return fmt.Errorf("op: %q is not get, range, prefix or all", p.Op)
	}
	setNonEmpty(v, "limit", p.Limit)
	return c.scanAll(r, st, storePath(st)+"/keys", v, p, "entries")
}

// getKey asks for the form's key; a missing key is a warning, not an error.
func (c *console) getKey(r *http.Request, st *graph.Store, p *storesPage) error {
	if p.Key == "" {
		return errors.New("key: give the key to look up")
	}
	path := storePath(st) + "/keys/" + url.PathEscape(p.Key)
	p.Query = path
	code, hdr, body := c.ask(r, path, nil)
	if code == http.StatusNotFound {
		p.Warnings = append(p.Warnings, fmt.Sprintf("no key %q in store %q", p.Key, st.Name))
		return nil
	}
	if code != http.StatusOK {
		return answerError(code, body)
	}
	var ans struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("the answer does not decode: %w", err)
	}
	p.Rows = append(p.Rows, storeRow{Key: p.Key, Value: compactJSON(ans.Value), ServedBy: c.servedBy(hdr)})
	return nil
}

// runWindowQuery reads the windows (sessions) of the form's key (op key, the default)
// or of every key (all) in the form's time range.
func (c *console) runWindowQuery(r *http.Request, st *graph.Store, p *storesPage) error {
	kinds := st.Kind + "s"
	v := url.Values{}
	setNonEmpty(v, "from", p.From)
	setNonEmpty(v, "to", p.To)
	switch p.Op {
	case "", "key":
		p.Op = "key"
		if p.Key == "" {
			return errors.New("key: give the key whose " + kinds + " to read")
		}
		path := storePath(st) + "/" + kinds + "/" + url.PathEscape(p.Key)
		p.Query = path + "?" + v.Encode()
		code, hdr, body := c.ask(r, path, v)
		if code != http.StatusOK {
			return answerError(code, body)
		}
		return addWindowRows(p, body, kinds, c.servedBy(hdr))
	case "all":
		return c.scanAll(r, st, storePath(st)+"/"+kinds, v, p, kinds)
	}
	return fmt.Errorf("op: %q is not key or all", p.Op)
}

// storePath is the query routes' path of st.
func storePath(st *graph.Store) string { return "/stores/" + url.PathEscape(st.Name) }

// setNonEmpty sets a query parameter the form filled in, and leaves out an empty one.
func setNonEmpty(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

// servedBy is the instance that answered a query: the one a forwarded query names,
// else this one.
func (c *console) servedBy(hdr http.Header) string {
	if served := hdr.Get(servedByHeader); served != "" {
		return served
	}
	return c.page("").Self
}

// scanAll asks this instance and, for a store partitioned over the group, every
// other one, and merges their answers by key.
func (c *console) scanAll(r *http.Request, st *graph.Store, path string, v url.Values, p *storesPage, list string) error {
	p.Query = path + "?" + v.Encode()
	code, _, body := c.ask(r, path, v)
	if code != http.StatusOK {
		return answerError(code, body)
	}
	self := c.page("").Self
	if err := addScanRows(p, body, list, self); err != nil {
		return err
	}
	if rt := c.h.app.rt.Load(); rt != nil && !st.Global && r.Header.Get(forwardedHeader) == "" {
		_, hosts := rt.registry.owners()
		for _, host := range c.otherInstances(hosts) {
			c.scanInstance(r, host, path, v, p, list)
		}
	}
	mergeRows(p)
	return nil
}

// scanInstance adds another instance's answer to the scan; when it does not answer,
// the page warns that the list lacks its partitions.
func (c *console) scanInstance(r *http.Request, host, path string, v url.Values, p *storesPage, list string) {
	var body []byte
	var err error
	if validOwner(host) {
		body, err = c.fetch(r, host, path, v)
	} else {
		err = fmt.Errorf("instance address %q is not host:port", host)
	}
	if err == nil {
		err = addScanRows(p, body, list, host)
	}
	if err != nil {
		c.h.log.Warn("console: an instance did not answer a scan", "instance", host, "path", path, "error", err)
		p.Warnings = append(p.Warnings, fmt.Sprintf("instance %s did not answer: the list lacks its partitions", host))
	}
}

// mergeRows orders the instances' rows by key (windows by start, then key) and cuts a
// key scan to its limit, as one instance's answer would be.
func mergeRows(p *storesPage) {
	slices.SortStableFunc(p.Rows, func(x, y storeRow) int {
		if x.Start != y.Start && p.Windowed {
			return strings.Compare(x.Start, y.Start)
		}
		return strings.Compare(x.Key, y.Key)
	})
	limit := defaultScanLimit
	if n, err := strconv.Atoi(p.Limit); err == nil && n > 0 {
		limit = n
	}
	if !p.Windowed && len(p.Rows) > limit {
		p.Rows, p.Truncated = p.Rows[:limit], true
	}
}
