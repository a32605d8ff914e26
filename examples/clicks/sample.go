package main

import "time"

// sampleStart is the time of the sample's first minute.
var sampleStart = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// sampleView is a view of the sample input: user, page and event time after sampleStart.
type sampleView struct {
	user  string
	page  string
	after time.Duration
}

func view(user, page string, minutes, seconds int) sampleView {
	return sampleView{user, page, time.Duration(minutes)*time.Minute + time.Duration(seconds)*time.Second}
}

// sampleInput is written one step at a time; the command waits until the application
// has processed a step before it writes the next. Stream time is kept per partition, so
// the sample is chosen to give the same output whichever users share a partition: each
// step's views are in event-time order, except two that are out of order on purpose.
var sampleInput = [][]sampleView{
	{
		view("u1", "/home", 0, 5),
		view("u2", "/home", 0, 30),
		view("u1", "/products", 0, 40),
		view("u3", "/home", 0, 55),
		view("u1", "/cart", 1, 10),
		view("u2", "/products", 1, 20),
		// Out of order, 15 s behind, but within the grace of its minute (10:01 closes
		// at 10:02:30): it counts.
		view("u2", "/about", 1, 5),
		view("u3", "/products", 2, 45),
		view("u1", "/checkout", 3, 0),
	},
	{
		// Late: u1's stream time has reached 10:03:00, past the close of minute 10:00
		// (its end, 10:01:00, plus 30 s of grace); the minute count drops it and counts
		// it in eddy_dropped_records_total{reason="late"}. u1's session is open until
		// 10:03:00 + gap + grace, so the session takes it.
		view("u1", "/home", 0, 10),
		view("u3", "/cart", 4, 0), // extends u3's session (within the 5-minute gap)
		view("u2", "/home", 9, 0), // a new session for u2 (more than 5 minutes later)
	},
	{
		// The next morning's first views move every partition's stream time past the
		// close of the sample's windows and sessions; their own stay open (not written).
		view("u1", "/home", 23*60, 0),
		view("u2", "/home", 23*60, 0),
		view("u3", "/home", 23*60, 0),
	},
}
