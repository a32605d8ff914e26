package stream_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// Ad impressions joined with the clicks on them within 10 s, with 5 s of grace: ad1's
// click comes 4 s after it; ad2 gets no click, and is emitted with a nil click once its
// window has closed — when stream time passes 0:20 + 10 s + 5 s.
func ExampleStreamLeftJoin() {
	b := stream.NewBuilder()
	str := serde.String()
	impressions := stream.From(b, str, str, []string{"impressions"})
	clicks := stream.From(b, str, str, []string{"clicks"})
	stream.StreamLeftJoin(impressions, clicks, func(shown string, click *string) string {
		if click == nil {
			return shown + ", not clicked"
		}
		return shown + ", clicked " + *click
	}, window.JoinTimeDifference(10*time.Second, 5*time.Second), stream.JoinedWith(str, str, str)).
		To("ad-results", str, str)
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
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	imp := topologytest.NewInputTopic(d, "impressions", str, str)
	clk := topologytest.NewInputTopic(d, "clicks", str, str)
	_ = imp.PipeAt("ad1", "shown 0:10", at(10))
	_ = imp.PipeAt("ad2", "shown 0:20", at(20))
	_ = clk.PipeAt("ad1", "at 0:14", at(14))
	_ = clk.PipeAt("ad3", "at 0:35", at(35)) // 35 s: ad2's window is still open (20 + 10 + 5)
	_ = clk.PipeAt("ad3", "at 0:36", at(36))
	out := topologytest.NewOutputTopic(d, "ad-results", str, str)
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Printf("%s %s (t=%ds)\n", r.Key, r.Value, r.Timestamp.Unix())
	}
	// Output:
	// ad1 shown 0:10, clicked at 0:14 (t=14s)
	// ad2 shown 0:20, not clicked (t=20s)
}
