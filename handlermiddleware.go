package eddy

import (
	"errors"
	"fmt"
	"net/http"
)

// limited refuses requests over the header and body limits before anything else.
func (h *handler) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerSize(r) > h.opts.MaxHeaderBytes {
			writeError(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request headers and URL exceed %d bytes", h.opts.MaxHeaderBytes))
			return
		}
		if r.ContentLength > h.opts.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes (the endpoints take none)", h.opts.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
		next.ServeHTTP(timeoutTyped{w}, r)
	})
}

// timeoutTyped labels the JSON answer http.TimeoutHandler writes on a timeout, which
// has no headers of its own: the only 503 without a Content-Type.
type timeoutTyped struct{ http.ResponseWriter }

func (w timeoutTyped) WriteHeader(code int) {
	if h := w.Header(); code == http.StatusServiceUnavailable && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w timeoutTyped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// headerSize is the size of a request's URL and headers as sent, roughly.
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Host) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// recovered turns a panic (a user serde panicking on a key or a stored value) into a
// 500 that says nothing about it; the panic goes to the log.
func (h *handler) recovered(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.log.Error("HTTP handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p)
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authorized runs the Authorize hook, if any, before next.
func (h *handler) authorized(next http.HandlerFunc) http.Handler {
	if h.opts.Authorize == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.opts.Authorize(r); err != nil {
			h.log.Info("request denied", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "error", err)
			if errors.Is(err, ErrUnauthenticated) {
				writeError(w, http.StatusUnauthorized, "unauthenticated")
				return
			}
			writeError(w, http.StatusForbidden, "forbidden")
			return
		}
		next(w, r)
	})
}
