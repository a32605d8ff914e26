package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// countIndependently counts words rune by rune, without wordcount.Words.
func countIndependently(text string) map[string]int64 {
	counts := map[string]int64{}
	var word []rune
	flush := func() {
		if len(word) > 0 {
			counts[string(word)]++
			word = word[:0]
		}
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			word = append(word, unicode.ToLower(r))
			continue
		}
		flush()
	}
	flush()
	return counts
}

func parseOutput(t *testing.T, out string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	prev := ""
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		word, n, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("output line %q is not word<TAB>count", line)
		}
		if word <= prev {
			t.Fatalf("output not sorted by word: %q after %q", word, prev)
		}
		prev = word
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		got[word] = v
	}
	return got
}

func checkCounts(t *testing.T, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d words, want %d", len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%q: %d, want %d", w, got[w], n)
		}
	}
}

func TestSampleTextOnTheEmbeddedBroker(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), options{partitions: 4, timeout: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, parseOutput(t, out.String()), countIndependently(sampleText))
}

func TestInputFile(t *testing.T) {
	var text strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&text, "Line %d: Straße, ÉCOLE & école; naïve café %d\n\n", i, i%9)
	}
	path := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), options{input: path, partitions: 3, stateDir: t.TempDir(), timeout: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, parseOutput(t, out.String()), countIndependently(text.String()))
}

func TestBadFlags(t *testing.T) {
	if err := run(context.Background(), options{partitions: 0}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-partitions") {
		t.Errorf("partitions 0: %v", err)
	}
	err := run(context.Background(), options{partitions: 1, input: filepath.Join(t.TempDir(), "missing.txt"), timeout: time.Minute}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-input") {
		t.Errorf("missing input file: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// -follow with -http: updates are printed as they come, and the endpoints answer.
func TestFollowWithHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(path, []byte("to be or not to be\nTo BE!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{input: path, partitions: 2, follow: true, httpAddr: addr, timeout: time.Minute}, out)
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "be\t3\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no update to be=3 printed; output so far:\n%s", out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/readyz", `"running"`},
		{"/stores/counts/keys/be", `"value":3`},
		// Another task's key: its output may be visible a moment before its store write
		// (the store is written after the transaction commits), so this polls too.
		{"/stores/counts/keys/not", `"value":1`},
		{"/metrics", "eddy_records_processed_total"},
		{"/topology", "Sub-topology: 1"},
		{"/ui/stores?store=counts&op=get&key=be", `<code>3</code>`},
	} {
		var body string
		for time.Now().Before(deadline) {
			resp, err := http.Get("http://" + addr + c.path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				if resp.StatusCode == http.StatusOK && strings.Contains(body, c.want) {
					break
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(body, c.want) {
			t.Errorf("%s: %q does not contain %s", c.path, body, c.want)
		}
	}
	var v struct{ Value int64 }
	resp, err := http.Get("http://" + addr + "/stores/counts/keys/not")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Value != 1 {
		t.Errorf("query not: %+v %v", v, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
