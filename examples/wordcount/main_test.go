package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if err := run(options{partitions: 4, timeout: time.Minute}, &out); err != nil {
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
	if err := run(options{input: path, partitions: 3, stateDir: t.TempDir(), timeout: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, parseOutput(t, out.String()), countIndependently(text.String()))
}

func TestBadFlags(t *testing.T) {
	if err := run(options{partitions: 0}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-partitions") {
		t.Errorf("partitions 0: %v", err)
	}
	err := run(options{partitions: 1, input: filepath.Join(t.TempDir(), "missing.txt"), timeout: time.Minute}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-input") {
		t.Errorf("missing input file: %v", err)
	}
}
