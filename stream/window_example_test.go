package stream_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// Page views per user and minute, with 10 s of grace: the view at 0:30 arrives after
// the one at 1:05, still in time; the one at 0:40 arrives when stream time is 1:15,
// after its window closed at 1:10, and is dropped.
func ExampleGroupedStream_WindowedBy() {
	b := stream.NewBuilder(stream.NoCaching())
	views := stream.From(b, serde.String(), serde.String(), []string{"views"})
	perMinute := views.GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(time.Minute, 10*time.Second)).Count()
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
	for _, v := range []struct {
		user string
		at   time.Duration
	}{{"ann", 10 * time.Second}, {"ann", 65 * time.Second}, {"ann", 30 * time.Second}, {"bob", 75 * time.Second}, {"ann", 40 * time.Second}} {
		_ = in.PipeAt(v.user, "/home", time.Unix(0, 0).Add(v.at))
	}
	out := topologytest.NewOutputTopic(d, "views-per-minute", minutes, serde.Int64())
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Printf("%s %v: %d\n", r.Key.Key, r.Key.Window, r.Value)
	}
	// Output:
	// ann [0,60000]: 1
	// ann [60000,120000]: 1
	// ann [0,60000]: 2
	// bob [60000,120000]: 1
}
