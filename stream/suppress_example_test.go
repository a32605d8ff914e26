package stream_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// Page views per user and minute, final results only: each minute comes out once,
// when stream time has passed its end plus the 10 s of grace (at 1:10 for the first
// minute), with every view counted, the late one at 0:30 too.
func ExampleTable_Suppress() {
	b := stream.NewBuilder()
	views := stream.From(b, serde.String(), serde.String(), []string{"views"})
	perMinute := views.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(time.Minute, 10*time.Second)).Count().
		Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	minutes := window.TimeWindowedSerde(serde.String(), time.Minute)
	stream.ToStream(perMinute).To("views-per-minute", minutes, serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := topologytest.New(topo, topologytest.Config{StartTime: time.Unix(0, 0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "views", serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, "views-per-minute", minutes, serde.Int64())
	for _, v := range []struct {
		user string
		at   time.Duration
	}{{"ann", 10 * time.Second}, {"ann", 65 * time.Second}, {"ann", 30 * time.Second}, {"bob", 69 * time.Second}, {"bob", 70 * time.Second}, {"ann", 200 * time.Second}} {
		_ = in.PipeAt(v.user, "/home", time.Unix(0, 0).Add(v.at))
		recs, _ := out.ReadRecords()
		for _, r := range recs {
			fmt.Printf("at %v: %s %v: %d\n", v.at, r.Key.Key, r.Key.Window, r.Value)
		}
	}
	// Output:
	// at 1m10s: ann [0,60000]: 2
	// at 3m20s: ann [60000,120000]: 1
	// at 3m20s: bob [60000,120000]: 2
}

// Emit on window close: the aggregation itself forwards each minute once it has
// closed, without a suppression buffer.
func ExampleTimeWindowedStream_Emit() {
	b := stream.NewBuilder()
	views := stream.From(b, serde.String(), serde.String(), []string{"views"})
	perMinute := views.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(time.Minute, 10*time.Second)).Emit(stream.OnWindowClose).Count()
	minutes := window.TimeWindowedSerde(serde.String(), time.Minute)
	stream.ToStream(perMinute).To("views-per-minute", minutes, serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := topologytest.New(topo, topologytest.Config{StartTime: time.Unix(0, 0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "views", serde.String(), serde.String())
	for _, at := range []time.Duration{10 * time.Second, 65 * time.Second, 30 * time.Second, 70 * time.Second} {
		_ = in.PipeAt("ann", "/home", time.Unix(0, 0).Add(at))
	}
	recs, _ := topologytest.NewOutputTopic(d, "views-per-minute", minutes, serde.Int64()).ReadRecords()
	for _, r := range recs {
		fmt.Printf("%s %v: %d\n", r.Key.Key, r.Key.Window, r.Value)
	}
	// Output:
	// ann [0,60000]: 2
}
