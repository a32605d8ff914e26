package eddy

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzWindowRange: whatever the query string, the window routes' parameters parse into
// a non-empty range or give an error naming the parameter at fault; a bound written as
// milliseconds or as RFC 3339 reads as the same instant.
func FuzzWindowRange(f *testing.F) {
	for _, s := range []string{"", "from=0&to=100", "from=2024-05-01T12:00:00Z", "to=2024-05-01T12:00:00.123%2B02:00",
		"from=5&to=4", "backward=true", "backward=maybe", "from=-9223372036854775808", "to=9223372036854775808",
		"from=%zz", "from=1&from=2", "to=0001-01-01T00:00:00Z"} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, rawQuery string, ms int64) {
		r := httptest.NewRequest("GET", "/stores/s/windows", nil)
		r.URL.RawQuery = rawQuery
		q, err := windowRange(r)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "from") && !strings.HasPrefix(msg, "to:") && !strings.HasPrefix(msg, "backward:") {
				t.Fatalf("query %q: error %q names no parameter", rawQuery, msg)
			}
			return
		}
		if q.From > q.To {
			t.Fatalf("query %q: empty range [%d, %d] accepted", rawQuery, q.From, q.To)
		}
		// The same instant, twice: milliseconds and RFC 3339.
		at := time.UnixMilli(ms).UTC()
		if at.Year() < 0 || at.Year() > 9999 {
			return // RFC 3339 has four-digit years
		}
		r = httptest.NewRequest("GET", "/stores/s/windows", nil)
		r.URL.RawQuery = url.Values{"from": {strconv.FormatInt(ms, 10)}, "to": {at.Format(time.RFC3339Nano)}}.Encode()
		q, err = windowRange(r)
		if err != nil || q.From != ms || q.To != ms {
			t.Fatalf("from=%d to=%s: %+v %v, want [%d, %d]", ms, at.Format(time.RFC3339Nano), q, err, ms, ms)
		}
	})
}
