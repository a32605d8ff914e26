package main

import (
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// Topics and stores of the clicks application.
const (
	ViewsTopic     = "clicks-page-views"       // key user ID, value PageView
	PerMinuteTopic = "clicks-views-per-minute" // key user ID in a 1-minute window, value int64
	SessionsTopic  = "clicks-sessions"         // key user ID in a session window, value int64
	PerMinuteStore = "views-per-minute"
	SessionsStore  = "user-sessions"
)

// Windows of the application: a view counts in its minute if it arrives before the
// minute's end plus Grace (in event time); a session ends after SessionGap without a
// view and takes late views for SessionGrace more.
const (
	Minute       = time.Minute
	Grace        = 30 * time.Second
	SessionGap   = 5 * time.Minute
	SessionGrace = time.Minute
)

// PageView is a page view as the web servers write it, keyed by user ID. Time is when
// the user saw the page: the event time the windows use, not when the record reached
// Kafka.
type PageView struct {
	Page string    `json:"page"`
	Time time.Time `json:"time"`
}

// viewTime is the source's timestamp extractor: a view's event time is its Time field.
func viewTime(r processor.Record[string, PageView], _ time.Time) (time.Time, error) {
	return r.Value.Time, nil
}

// Topology builds the clicks analytics: page views per user in 1-minute tumbling
// windows, final results only (one count per user and minute, written once the minute
// has closed), and user sessions, also final only.
func Topology() (*topology.Topology, error) {
	b := stream.NewBuilder()
	views := stream.FromConsumed(b,
		stream.Consume(serde.String(), serde.JSON[PageView]()).WithTimestamps(viewTime),
		[]string{ViewsTopic})
	byUser := views.GroupByKey(serde.String(), serde.JSON[PageView]())

	// Suppress holds each minute's count in a changelogged buffer until the minute
	// closes (end + grace reached by stream time), then writes it once.
	perMinute := byUser.WindowedBy(window.Tumbling(Minute, Grace)).
		Count(stream.Materialized(PerMinuteStore)).
		Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	stream.ToStream(perMinute).To(PerMinuteTopic, window.TimeWindowedSerde(serde.String(), Minute), serde.Nullable(serde.Int64()))

	// Emit on window close: the aggregation itself writes a session once it has
	// closed, with no buffer of its own (Kafka Streams' EmitStrategy.onWindowClose).
	sessions := byUser.WindowedBySession(window.Sessions(SessionGap, SessionGrace)).
		Emit(stream.OnWindowClose).
		Count(stream.Materialized(SessionsStore))
	stream.ToStream(sessions).To(SessionsTopic, window.SessionWindowedSerde(serde.String()), serde.Nullable(serde.Int64()))
	return b.Build()
}
