package eddy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// forwardedHeader marks a query forwarded by another instance (its value is the
// sender's AdvertisedAddr). A query carrying it is answered from the local store or
// not at all, never forwarded again: a query takes at most one hop, so ownership maps
// that disagree (instances in different generations during a rebalance, a member that
// announces another's address) cannot make instances forward to each other in a loop.
const forwardedHeader = "X-Eddy-Forwarded"

// servedByHeader names the instance that answered a forwarded query.
const servedByHeader = "X-Eddy-Served-By"

// validOwner reports whether an owner address announced through the group is a plain
// host:port, so that it can only name a host, never a path, user or query.
func validOwner(owner string) bool {
	host, port, err := net.SplitHostPort(owner)
	return err == nil && host != "" && port != "" && !strings.ContainsAny(owner, "/?#@\\ \t\r\n%")
}

// answerQueryError answers a query whose read of a store failed and reports whether it
// did (false for a nil err): a key owned by another instance is forwarded to it (once:
// a forwarded query that is not local either, or one with no known owner, is not
// ready), a store not ready yet is 503, anything else 500.
func (h *handler) answerQueryError(w http.ResponseWriter, r *http.Request, a *App, err error) bool {
	var nl *NotLocalError
	switch {
	case err == nil:
		return false
	case errors.As(err, &nl):
		if nl.Owner == "" || nl.Owner == a.cfg.AdvertisedAddr || r.Header.Get(forwardedHeader) != "" {
			h.notReady(w, r, err)
		} else {
			h.forward(w, r, nl.Owner)
		}
	case errors.Is(err, ErrNotReady):
		h.notReady(w, r, err)
	default:
		h.internalError(w, r, "reading the store failed", err)
	}
	return true
}

// forward asks the owner of a key and relays its answer.
func (h *handler) forward(w http.ResponseWriter, r *http.Request, owner string) {
	if !validOwner(owner) {
		h.internalError(w, r, "the key's owner announced an unusable address", fmt.Errorf("owner address %q is not host:port", owner))
		return
	}
	u := url.URL{Scheme: "http", Host: owner, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		h.internalError(w, r, "forwarding the query failed", err)
		return
	}
	req.Header.Set(forwardedHeader, h.app.cfg.AdvertisedAddr)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.fwdFailures.warn(h.log, owner, "forwarded query failed", "path", r.URL.Path, "owner", owner, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the instance holding the key did not answer; retry")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		h.log.Warn("forwarded query answered with a redirect; not followed", "path", r.URL.Path, "owner", owner, "status", resp.StatusCode, "location", resp.Header.Get("Location"))
		writeError(w, http.StatusBadGateway, "the instance holding the key gave no answer")
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.opts.MaxForwardedBytes+1))
	switch {
	case err != nil:
		h.log.Warn("forwarded query: reading the answer failed", "path", r.URL.Path, "owner", owner, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the instance holding the key did not answer; retry")
		return
	case int64(len(body)) > h.opts.MaxForwardedBytes:
		h.log.Warn("forwarded query: answer too large; not relayed", "path", r.URL.Path, "owner", owner, "limit", h.opts.MaxForwardedBytes)
		writeError(w, http.StatusBadGateway, fmt.Sprintf("the answer exceeds %d bytes", h.opts.MaxForwardedBytes))
		return
	}
	for _, k := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(servedByHeader, owner)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}
