package kstreams

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Topologies are the names the oracle knows.
var Topologies = []string{"T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "T10"}

// WindowTopologies are the windowed topologies: W1 time windows, W2 sliding windows,
// W3 session windows, W4 session windows with a longer retention. Their outputs
// include the stores' changelog topics, compared compacted (see CompactChangelog).
// W5-W8 are final results: W5 suppress(untilWindowCloses) of time windows, W6 of
// sessions, W7 emitStrategy(onWindowClose), W8 suppress(untilTimeLimit) with a
// bounded buffer that emits early; their outputs are the output topics only (eddy's
// suppression buffer changelog is its own format).
var WindowTopologies = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"}

// UncachedOnly are the topologies whose output Kafka Streams' record cache changes in a
// way eddy does not copy, with the reason: they are compared with caching off only.
var UncachedOnly = map[string]string{
	"W3": "Kafka Streams' caching session store (CachingSessionStore.findSessions, 4.1.1) " +
		"merges its read cache, which keeps sessions after they expired in the store, so a " +
		"record can join a session past the store's retention until the cache evicts it (or " +
		"the instance restarts with an empty cache); eddy's session store expires by " +
		"retention alone. W4 is W3 with a retention that makes the difference unreachable.",
}

// ChangelogTopic is the changelog of store in topology as the oracle's driver names it
// (application id "oracle-<topology>"); RunTopologyTest gives eddy's driver that
// application id too.
func ChangelogTopic(topology, store string) string {
	return "oracle-" + topology + "-" + store + "-changelog"
}

// windowInputs is the input topic of each windowed topology.
var windowInputs = map[string]string{"W1": "win-in", "W2": "slide-in", "W3": "sess-in", "W4": "sess-in",
	"W5": "fin-in", "W6": "fin-sess-in", "W7": "close-in", "W8": "limit-in"}

// Outputs are the output topics of each topology, as the oracle lists them.
var Outputs = map[string][]string{
	"T1":  {"wc-out"},
	"T2":  {"orders-total", "orders-count", "orders-agg"},
	"T3":  {"clicks-inner", "clicks-left"},
	"T4":  {"tt-inner", "tt-left", "tt-outer"},
	"T5":  {"fk-inner", "fk-left"},
	"T6":  {"region-sum", "region-count", "region-reduce"},
	"T7":  {"merged", "other"},
	"T8":  {"ts-out", "ts-count", "ts-table-out"},
	"T9":  {"g-inner", "g-left"},
	"T10": {"r-joined"},
	"W1": {"tumble-count", "hop-agg", "tumble-reduce",
		ChangelogTopic("W1", "tumble-count"), ChangelogTopic("W1", "hop-agg"), ChangelogTopic("W1", "tumble-reduce")},
	"W2": {"slide-count", "slide-agg", ChangelogTopic("W2", "slide-count"), ChangelogTopic("W2", "slide-agg")},
	"W3": {"session-count", "session-agg", ChangelogTopic("W3", "session-count"), ChangelogTopic("W3", "session-agg")},
	"W4": {"session-count-r", "session-agg-r", ChangelogTopic("W4", "session-count-r"), ChangelogTopic("W4", "session-agg-r")},
	"W5": {"fin-tumble", "fin-hop"},
	"W6": {"fin-session-count", "fin-session-agg"},
	"W7": {"close-tumble", "close-slide", "close-session"},
	"W8": {"limit-count", "limit-table"},
}

// Base is the earliest input timestamp; inputs spread over the hour after it.
var Base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// nonWord is Java's "\\W+": \w is [a-zA-Z_0-9] unless UNICODE_CHARACTER_CLASS is set.
var nonWord = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// Words is T1's word rule as Java runs it: v.toLowerCase(Locale.ROOT).split("\\W+")
// without the empty strings. Java lower-cases "İ" (U+0130) to "i" and U+0307, where Go
// gives "i" alone; U+0307 is not a word character, so it ends the word. Other
// differences between the two lower-case mappings only touch characters outside
// [a-zA-Z0-9_], which are separators either way.
func Words(line string) []string {
	lower := strings.ToLower(strings.ReplaceAll(line, "İ", "i\u0307"))
	var out []string
	for _, w := range nonWord.Split(lower, -1) {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Inputs makes n seeded random input records for topology: keys from small pools (so
// they collide), tombstones, repeated values (updates that change nothing), and
// timestamps in random order over an hour (some equal).
// The same topology, seed and n give the same records.
func Inputs(topology string, seed uint64, n int) ([]Record, error) {
	g := gen{rng: rand.New(rand.NewPCG(seed, 0x6b73747265616d73))}
	var next func() Record
	switch topology {
	case "T1":
		next = g.t1
	case "T2":
		next = g.t2
	case "T3":
		next = g.t3
	case "T4":
		next = g.t4
	case "T5":
		next = g.t5
	case "T6":
		next = g.t6
	case "T7":
		next = g.t7
	case "T8":
		next = g.t8
	case "T9":
		next = g.t9
	case "T10":
		next = g.t10
	case "P1":
		next = g.p1
	case "W1", "W2", "W3", "W4":
		return g.windowed(windowInputs[topology], n, Base), nil
	case "W5", "W6", "W7", "W8":
		return g.onTheEdge(g.windowed(windowInputs[topology], n, Base)), nil
	default:
		return nil, fmt.Errorf("kstreams: no input generator for topology %q (known: %s, %s)", topology,
			strings.Join(Topologies, ", "), strings.Join(WindowTopologies, ", "))
	}
	out := make([]Record, n)
	last := map[string][]byte{} // topic and key → the last value generated for them
	for i := range out {
		r := next()
		id := r.Topic + "\x00" + string(r.Key)
		// Now and then the same value again: an update that changes nothing.
		if v, ok := last[id]; ok && v != nil && g.rng.IntN(10) == 0 {
			r.Value = v
		}
		last[id] = r.Value
		r.Timestamp = g.timestamp()
		out[i] = r
	}
	return out, nil
}

type gen struct{ rng *rand.Rand }

func (g gen) timestamp() time.Time {
	// One of 600 slots of 6 s: out of order, and equal now and then.
	return Base.Add(time.Duration(g.rng.IntN(600)) * 6 * time.Second)
}

func (g gen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

// tombstone is true for about one record in eight.
func (g gen) tombstone() bool { return g.rng.IntN(8) == 0 }

func (g gen) rec(topic, key string, value *string) Record {
	r := Record{Topic: topic, Key: []byte(key)}
	if value != nil {
		r.Value = []byte(*value)
	}
	return r
}

func ptr(s string) *string { return &s }

// t1Words mix cases, digits, underscores (a word character in Java), apostrophes and
// hyphens (not), non-ASCII letters (separators for "\\W"), and characters whose lower
// case is ASCII (KELVIN SIGN → k; İ → i + U+0307).
var t1Words = []string{
	"the", "The", "THE", "kafka", "Kafka", "KAFKA", "stream", "Streams", "state_store", "x86_64",
	"2026", "v2", "007", "don't", "e-mail", "rock'n'roll", "C++", "node.js", "50%", "#tag", "@user",
	"Straße", "STRASSE", "école", "ÉCOLE", "naïve", "İstanbul", "KİK", "\u212Aelvin", "ΑΘΗΝΑ", "σοφός",
	"Москва", "東京", "٣٤", "ﬁne", "😀ok😀", "a", "I", "_", "__init__",
}

var t1Seps = []string{" ", " ", " ", "  ", "\t", ", ", ". ", "! ", "; ", " - ", "—", "\u00a0", "、", "\r\n", "\u0301"}

func (g gen) t1() Record {
	key := g.pick("k1", "k2", "k3")
	switch g.rng.IntN(10) {
	case 0:
		return g.rec("wc-in", key, nil)
	case 1:
		return g.rec("wc-in", key, ptr(g.pick("", " ", "...", "😀")))
	}
	var sb strings.Builder
	if g.rng.IntN(4) == 0 {
		sb.WriteString(g.pick(t1Seps...)) // a leading separator: Java's split yields ""
	}
	for i := range 1 + g.rng.IntN(8) {
		if i > 0 {
			sb.WriteString(g.pick(t1Seps...))
		}
		sb.WriteString(g.pick(t1Words...))
	}
	return g.rec("wc-in", key, ptr(sb.String()))
}

func (g gen) t2() Record {
	key := g.pick("o1", "o2", "o3", "o4", "o5", "o6")
	if g.tombstone() {
		return g.rec("orders", key, nil)
	}
	amount := strconv.Itoa(g.rng.IntN(1000))
	if g.rng.IntN(10) == 0 {
		amount = "-" + amount
	}
	return g.rec("orders", key, ptr(g.pick("alice", "bob", "carol", "émile", "o1")+":"+amount))
}

func (g gen) t3() Record {
	key := g.pick("u1", "u2", "u3", "u4", "u5")
	if g.rng.IntN(5) < 2 {
		if g.tombstone() {
			return g.rec("users", key, nil)
		}
		return g.rec("users", key, ptr(g.pick("Ann", "Bo", "Cy", "Dé", "")))
	}
	if g.tombstone() {
		return g.rec("clicks", key, nil)
	}
	return g.rec("clicks", key, ptr("c"+strconv.Itoa(g.rng.IntN(100))))
}

func (g gen) t4() Record {
	key := g.pick("k1", "k2", "k3", "k4")
	topic, prefix := "left-t", "a"
	if g.rng.IntN(2) == 0 {
		topic, prefix = "right-t", "b"
	}
	if g.rng.IntN(5) == 0 {
		return g.rec(topic, key, nil)
	}
	return g.rec(topic, key, ptr(prefix+strconv.Itoa(g.rng.IntN(100))))
}

func (g gen) t5() Record {
	if g.rng.IntN(3) == 0 {
		key := g.pick("p1", "p2", "p3", "p4", "p5")
		if g.rng.IntN(5) == 0 {
			return g.rec("fk-products", key, nil)
		}
		return g.rec("fk-products", key, ptr(g.pick("apple", "pear", "plum", "fig")+strconv.Itoa(g.rng.IntN(10))))
	}
	key := g.pick("o1", "o2", "o3", "o4", "o5", "o6")
	if g.rng.IntN(6) == 0 {
		return g.rec("fk-orders", key, nil)
	}
	// p6 is never a product key: its orders join with nothing.
	return g.rec("fk-orders", key, ptr(g.pick("p1", "p2", "p3", "p4", "p6")+":"+strconv.Itoa(1+g.rng.IntN(9))))
}

func (g gen) t6() Record {
	key := g.pick("u1", "u2", "u3", "u4", "u5", "u6")
	if g.rng.IntN(6) == 0 {
		return g.rec("assign", key, nil)
	}
	return g.rec("assign", key, ptr(g.pick("north", "south", "east", "west")+":"+strconv.Itoa(g.rng.IntN(100))))
}

// t7Values start with a, b or neither (A and B are neither); the a-values' suffixes avoid
// characters whose Java upper case is longer (ß, ligatures), see the package doc.
func (g gen) t7() Record {
	key := g.pick("e1", "e2", "e3", "e4")
	if g.tombstone() {
		return g.rec("events", key, nil)
	}
	start := g.pick("a", "a", "b", "b", "A", "B", "c", "", "é", "ж")
	return g.rec("events", key, ptr(start+g.pick("", "x", "lpha", "été", "жук", "ω", "東京", " z", "9")))
}

// windowed makes the input of the windowed topologies: three keys, values "v<n>" (one
// in ten null), and event time that mostly moves forward by 0-3 s a record, with
// records now and then behind it by up to 20 s (out of order, some within the grace
// periods of 5 and 10 s, some after) and a few 60 s behind (late for every window),
// some equal timestamps, and now and then a jump of a minute (windows close).
func (g gen) windowed(topic string, n int, base time.Time) []Record {
	out := make([]Record, n)
	cursor := base.Add(time.Duration(g.rng.IntN(30)) * time.Second)
	for i := range out {
		switch r := g.rng.IntN(40); {
		case r == 0:
			cursor = cursor.Add(time.Minute)
		case r < 25:
			cursor = cursor.Add(time.Duration(g.rng.IntN(4)) * time.Second)
		}
		ts := cursor
		switch r := g.rng.IntN(10); {
		case r < 2:
			ts = cursor.Add(-time.Duration(g.rng.IntN(20_000)) * time.Millisecond)
		case r == 2 && g.rng.IntN(3) == 0:
			ts = cursor.Add(-time.Minute)
		case r == 3:
			ts = cursor.Add(time.Duration(g.rng.IntN(1000)) * time.Millisecond)
		}
		var v *string
		if g.rng.IntN(10) != 0 {
			v = ptr("v" + strconv.Itoa(i))
		}
		rec := g.rec(topic, g.pick("k1", "k2", "k3"), v)
		rec.Timestamp = ts
		out[i] = rec
	}
	return out
}

// onTheEdge moves one record in five to a millisecond before a whole second: the
// windows' and time limits' boundaries are whole seconds, so records land on both
// sides of them and an emission one millisecond early or late shows.
func (g gen) onTheEdge(recs []Record) []Record {
	for i := range recs {
		if g.rng.IntN(5) == 0 {
			recs[i].Timestamp = recs[i].Timestamp.Truncate(time.Second).Add(-time.Millisecond)
		}
	}
	return recs
}

// EarlyInputs are the input of a windowed topology (WindowTopologies) as Inputs makes
// it, but starting at the Unix epoch: records before the first time difference of
// sliding windows, which Kafka Streams puts into the window [0, difference]
// (KStreamSlidingWindowAggregate.processEarly). Timestamps that would be negative are
// 0 (Kafka has no negative record timestamps): more records at the epoch itself.
func EarlyInputs(topology string, seed uint64, n int) ([]Record, error) {
	topic, ok := windowInputs[topology]
	if !ok {
		return nil, fmt.Errorf("kstreams: %q is not a windowed topology (%s)", topology, strings.Join(WindowTopologies, ", "))
	}
	g := gen{rng: rand.New(rand.NewPCG(seed, 0x6b73747265616d73))}
	recs := g.windowed(topic, n, time.Unix(0, 0).UTC())
	for i := range recs {
		if recs[i].Timestamp.Before(time.Unix(0, 0)) {
			recs[i].Timestamp = time.Unix(0, 0).UTC()
		}
	}
	return recs, nil
}

// timestampedChangelogs are the changelogs of timestamped window stores (the windowed
// aggregations'). Kafka Streams' change-logging layer of such a store
// (ChangeLoggingTimestampedWindowBytesStore) writes the plain value and puts the
// aggregate's timestamp on the changelog record; eddy's stores log their bytes, 8 bytes of
// timestamp then the value (the ValueAndTimestamp layout, as its key-value DSL stores
// do). CompactChangelog moves eddy's timestamp to the record for the comparison.
var timestampedChangelogs = map[string]bool{
	ChangelogTopic("W1", "tumble-count"): true, ChangelogTopic("W1", "hop-agg"): true,
	ChangelogTopic("W1", "tumble-reduce"): true,
	ChangelogTopic("W2", "slide-count"):   true, ChangelogTopic("W2", "slide-agg"): true,
}

// CompactChangelog is what a changelog topic holds once compacted, the last record of
// each key, in key order: the state a restore rebuilds. Changelogs are compared
// compacted because the order of a commit's changelog records is free (Kafka Streams
// logs each write as it happens, eddy each dirty key at the commit, in key order), and
// so are the timestamps of all but a timestamped store's records (Kafka Streams' are the
// input record's; eddy does not set them). eddy's records of a timestamped store
// (fromEddy) have the timestamp moved out of the value onto the record, as Kafka Streams
// writes them.
func CompactChangelog(topic string, recs []Record, fromEddy bool) []Record {
	last := map[string]Record{}
	for _, r := range recs {
		if timestampedChangelogs[topic] {
			if fromEddy && len(r.Value) >= 8 {
				r.Timestamp = time.UnixMilli(int64(binary.BigEndian.Uint64(r.Value))).UTC()
				r.Value = r.Value[8:]
			}
		} else {
			r.Timestamp = time.Time{}
		}
		last[string(r.Key)] = r
	}
	out := make([]Record, 0, len(last))
	for _, k := range slices.Sorted(maps.Keys(last)) {
		out = append(out, last[k])
	}
	return out
}

// t8 values are "ms:payload" with an event time in the hour after Base (one in ten
// negative), or a payload without one, or null.
func (g gen) t8() Record {
	topic := "ts-in"
	if g.rng.IntN(5) < 2 {
		topic = "ts-table"
	}
	key := g.pick("k1", "k2", "k3", "k4")
	switch {
	case g.tombstone():
		return g.rec(topic, key, nil)
	case g.rng.IntN(6) == 0:
		return g.rec(topic, key, ptr("x"+strconv.Itoa(g.rng.IntN(10))))
	}
	ms := Base.UnixMilli() + int64(g.rng.IntN(3600))*1000
	if g.rng.IntN(10) == 0 {
		ms = -1 - int64(g.rng.IntN(1000))
	}
	return g.rec(topic, key, ptr(strconv.FormatInt(ms, 10)+":p"+strconv.Itoa(g.rng.IntN(10))))
}

// t9: global table "g-users" and stream "g-clicks" with values "user:item" (now and
// then without ':' or null: no join key); u5 is never a user.
func (g gen) t9() Record {
	if g.rng.IntN(5) < 2 {
		key := g.pick("u1", "u2", "u3", "u4")
		if g.tombstone() {
			return g.rec("g-users", key, nil)
		}
		return g.rec("g-users", key, ptr(g.pick("Ann", "Bo", "Cy", "Dé", "")))
	}
	key := g.pick("c1", "c2", "c3")
	switch {
	case g.tombstone():
		return g.rec("g-clicks", key, nil)
	case g.rng.IntN(8) == 0:
		return g.rec("g-clicks", key, ptr("nouser"))
	}
	return g.rec("g-clicks", key, ptr(g.pick("u1", "u2", "u3", "u4", "u5")+":i"+strconv.Itoa(g.rng.IntN(10))))
}

// t10: table "r-users" and stream "r-orders" with values "user:amount" (now and then
// without ':', or null); u5 is never a user.
func (g gen) t10() Record {
	if g.rng.IntN(5) < 2 {
		key := g.pick("u1", "u2", "u3", "u4")
		if g.tombstone() {
			return g.rec("r-users", key, nil)
		}
		return g.rec("r-users", key, ptr(g.pick("Ann", "Bo", "Cy", "Dé", "")))
	}
	key := g.pick("o1", "o2", "o3", "u1")
	switch {
	case g.tombstone():
		return g.rec("r-orders", key, nil)
	case g.rng.IntN(8) == 0:
		return g.rec("r-orders", key, ptr("nouser"))
	}
	return g.rec("r-orders", key, ptr(g.pick("u1", "u2", "u3", "u4", "u5")+":"+strconv.Itoa(g.rng.IntN(100))))
}
