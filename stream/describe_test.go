package stream_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/stream"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The description of a DSL topology names its nodes in Kafka Streams' style and lists
// the internal topics; it is stable, so it is compared with a golden file.
func TestDescribeGolden(t *testing.T) {
	b := stream.NewBuilder()
	lines := stream.From(b, str, nstr, []string{"lines"})
	words := stream.FlatMapValues(lines, func(_ string, v *string) []string {
		if v == nil {
			return nil
		}
		return strings.Fields(*v)
	})
	counts := stream.GroupBy(words, func(_, w string) string { return w }, str, str).Count()
	users := stream.TableFrom(b, str, str, "users")
	enriched := stream.LeftJoin(stream.ToStream(counts), users, func(n *int64, u *string) string {
		if u == nil {
			return "-"
		}
		return *u
	})
	enriched.To("out", str, str)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := topo.Describe()
	path := filepath.Join("testdata", "describe.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Describe() differs from %s (run with -update to accept):\n%s", path, got)
	}
	for _, name := range []string{"KSTREAM-SOURCE-0000000000", "KSTREAM-FLATMAPVALUES-0000000001", "KSTREAM-KEY-SELECT-0000000002",
		"KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition", "KSTREAM-AGGREGATE-0000000003", "KTABLE-TOSTREAM-", "KSTREAM-LEFTJOIN-"} {
		if !strings.Contains(got, name) {
			t.Errorf("Describe() lacks %q", name)
		}
	}
}
