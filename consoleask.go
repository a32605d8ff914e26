package eddy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// The store browser's side of the query routes: it asks them in-process (ask) and
// turns their JSON answers into the page's rows.

// addScanRows adds the rows of a key scan's answer, or of a window (session) query's
// when list names its windows.
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
