package stream_test

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// Count words, then read the counts from the output topic and the store.
func Example() {
	b := stream.NewBuilder()
	lines := stream.From(b, serde.String(), serde.String(), []string{"lines"})
	words := stream.FlatMapValues(lines, func(_, l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := stream.GroupBy(words, func(_, w string) string { return w }, serde.String(), serde.String()).
		Count(stream.Materialized("counts"))
	stream.ToStream(counts).To("counts", serde.String(), serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "lines", serde.String(), serde.String())
	_ = in.PipeValues("to be or", "not to be")
	out := topologytest.NewOutputTopic(d, "counts", serde.String(), serde.Int64())
	recs, _ := out.ReadRecords()
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprint(r.Key, "=", r.Value))
	}
	fmt.Println(strings.Join(parts, " "))
	store, _ := topologytest.KeyValueStore[string, stream.Timestamped[int64]](d, "counts")
	be, _, _ := store.Get("be")
	fmt.Println("be:", be.Value)
	// Output:
	// to=1 be=1 or=1 not=1 to=2 be=2
	// be: 2
}

// Enrich a stream from a table: the left join keeps clicks of unknown users.
func ExampleLeftJoin() {
	b := stream.NewBuilder()
	clicks := stream.From(b, serde.String(), serde.String(), []string{"clicks"})
	users := stream.TableFrom(b, serde.String(), serde.String(), "users")
	stream.LeftJoin(clicks, users, func(page string, user *string) string {
		if user == nil {
			return page + " by someone"
		}
		return page + " by " + *user
	}).To("enriched", serde.String(), serde.String())
	topo, _ := b.Build()
	d, _ := topologytest.New(topo, topologytest.Config{})
	defer d.Close()
	_ = topologytest.NewInputTopic(d, "users", serde.String(), serde.String()).Pipe("u1", "Ann")
	in := topologytest.NewInputTopic(d, "clicks", serde.String(), serde.String())
	_ = in.Pipe("u1", "/home")
	_ = in.Pipe("u2", "/cart")
	recs, _ := topologytest.NewOutputTopic(d, "enriched", serde.String(), serde.String()).ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value)
	}
	// Output:
	// u1 /home by Ann
	// u2 /cart by someone
}

// Record caching holds a table's updates back until the commit and forwards each key
// once: committing after every two lines, the word count writes each word's count of
// those two lines, least recently updated first.
func ExampleCacheMaxBytes() {
	b := stream.NewBuilder(stream.CacheMaxBytes(1 << 20))
	lines := stream.From(b, serde.String(), serde.String(), []string{"lines"})
	words := stream.FlatMapValues(lines, func(_, l string) []string { return strings.Fields(l) })
	counts := stream.GroupBy(words, func(_, w string) string { return w }, serde.String(), serde.String()).Count()
	stream.ToStream(counts).To("counts", serde.String(), serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := topologytest.New(topo, topologytest.Config{CommitEvery: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "lines", serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, "counts", serde.String(), serde.Int64())
	for _, line := range []string{"to be or", "not to be", "that is"} {
		_ = in.Pipe("", line)
		recs, _ := out.ReadRecords()
		fmt.Printf("%q:", line)
		for _, r := range recs {
			fmt.Print(" ", r.Key, "=", r.Value)
		}
		fmt.Println()
	}
	_ = d.Commit()
	recs, _ := out.ReadRecords()
	fmt.Print("commit:")
	for _, r := range recs {
		fmt.Print(" ", r.Key, "=", r.Value)
	}
	fmt.Println()
	// Output:
	// "to be or":
	// "not to be": or=1 not=1 to=2 be=2
	// "that is":
	// commit: that=1 is=1
}
