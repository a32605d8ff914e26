package eddy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
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
	base := "/stores/" + url.PathEscape(st.Name)
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	if st.Kind == graph.KindKeyValue {
		switch p.Op {
		case "", "get":
			p.Op = "get"
			if p.Key == "" {
				return errors.New("key: give the key to look up")
			}
			path := base + "/keys/" + url.PathEscape(p.Key)
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
			served := hdr.Get(servedByHeader)
			if served == "" {
				served = c.page("").Self
			}
			p.Rows = append(p.Rows, storeRow{Key: p.Key, Value: compactJSON(ans.Value), ServedBy: served})
			return nil
		case "range":
			set("from", p.From)
			set("to", p.To)
		case "prefix":
			set("prefix", p.Prefix)
		case "all":
		default:
			return fmt.Errorf("op: %q is not get, range, prefix or all", p.Op)
		}
		set("limit", p.Limit)
		return c.scanAll(r, st, base+"/keys", v, p, "entries")
	}
	kinds := st.Kind + "s"
	set("from", p.From)
	set("to", p.To)
	switch p.Op {
	case "", "key":
		p.Op = "key"
		if p.Key == "" {
			return errors.New("key: give the key whose " + kinds + " to read")
		}
		path := base + "/" + kinds + "/" + url.PathEscape(p.Key)
		p.Query = path + "?" + v.Encode()
		code, hdr, body := c.ask(r, path, v)
		if code != http.StatusOK {
			return answerError(code, body)
		}
		served := hdr.Get(servedByHeader)
		if served == "" {
			served = c.page("").Self
		}
		return addWindowRows(p, body, kinds, served)
	case "all":
		return c.scanAll(r, st, base+"/"+kinds, v, p, kinds)
	}
	return fmt.Errorf("op: %q is not key or all", p.Op)
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
		var others []string
		for host := range hosts {
			if host != c.h.app.cfg.AdvertisedAddr {
				others = append(others, host)
			}
		}
		sort.Strings(others)
		for _, host := range others {
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
	}
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
	return nil
}

func addScanRows(p *storesPage, body []byte, list, servedBy string) error {
	if list != "entries" {
		return addWindowRows(p, body, list, servedBy)
	}
	var ans struct {
		Entries []struct {
			Key   json.RawMessage `json:"key"`
			Value json.RawMessage `json:"value"`
		} `json:"entries"`
		Truncated bool `json:"truncated"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("the answer of %s does not decode: %w", servedBy, err)
	}
	p.Truncated = p.Truncated || ans.Truncated
	for _, e := range ans.Entries {
		p.Rows = append(p.Rows, storeRow{Key: keyText(e.Key), Value: compactJSON(e.Value), ServedBy: servedBy})
	}
	return nil
}

func addWindowRows(p *storesPage, body []byte, list, servedBy string) error {
	var ans map[string]json.RawMessage
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("the answer of %s does not decode: %w", servedBy, err)
	}
	var ws []struct {
		Key       json.RawMessage `json:"key"`
		StartTime string          `json:"startTime"`
		EndTime   string          `json:"endTime"`
		Value     json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(ans[list], &ws); err != nil {
		return fmt.Errorf("the answer of %s does not decode: %w", servedBy, err)
	}
	for _, w := range ws {
		p.Rows = append(p.Rows, storeRow{Key: keyText(w.Key), Start: w.StartTime, End: w.EndTime, Value: compactJSON(w.Value), ServedBy: servedBy})
	}
	return nil
}

// keyText shows a JSON key as text: a string as it is, anything else as JSON.
func keyText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compactJSON(raw)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// answerError turns a query route's error answer into the message to show.
func answerError(code int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s (HTTP %d)", e.Error, code)
	}
	return fmt.Errorf("HTTP %d", code)
}

// ask runs a query route of this handler for the console, with the console request's
// credentials and context.
func (c *console) ask(r *http.Request, path string, v url.Values) (int, http.Header, []byte) {
	req := r.Clone(r.Context())
	req.URL = &url.URL{Path: path, RawQuery: v.Encode()}
	req.RequestURI = req.URL.RequestURI()
	req.Pattern = ""
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	c.h.mux.ServeHTTP(rec, req)
	return rec.code, rec.header, rec.body.Bytes()
}

// recorder keeps an answer of the handler's own routes.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
