// Package kstreams runs Kafka Streams itself as the oracle of eddy's differential tests.
//
// The oracle is a small Java program (oracle/, a Maven project on kafka-streams and
// kafka-streams-test-utils 4.1.1, the broker's version) that runs the topologies
// below in Kafka Streams' TopologyTestDriver. [Start] builds it with Maven into a cache
// directory the first time (Maven Central or a warm ~/.m2 is needed then) and starts one
// JVM that serves every [Oracle.Run]; [RunTopologyTest] runs an eddy topology on the same
// input in eddy's topologytest, and [Diff] compares the two outputs record by record: the
// same records in the same order per output topic, key bytes, value bytes (nil is a
// tombstone) and timestamp in milliseconds. [Inputs] makes the seeded random inputs: keys
// that collide, tombstones, out-of-order timestamps.
//
// # Running
//
//	go test ./integration/kstreams/...     # the oracle's own tests, then the DSL suite (eddytopo)
//
// Java 17+ and Maven must be on PATH (.ci/run installs them). The first run builds the
// oracle with `mvn -q -B package` in <os.UserCacheDir>/eddy/kstreams-oracle/<hash of
// oracle/> (about 17 s with an empty ~/.m2 on an idle machine, 8 s with a warm one);
// later runs reuse it and start the JVM in about a second. Without Maven Central and a
// warm ~/.m2 the tests fail with ErrBuild and Maven's output: they never skip. Each
// request runs in a fresh TopologyTestDriver with in-memory stores (RocksDB gave the same
// output on 21 generated cases, 25 times slower, as the driver commits after every
// record).
//
// # The topologies
//
// Keys are String (UTF-8); values String or Long (8 bytes big-endian, Kafka's
// LongSerializer). Input keys are never null. Inputs are one interleaved list of records
// piped in order; outputs are read after all input has been piped. Names are topic names.
//
//	T1 wordcount: stream "wc-in" → flatMapValues(v == null ? [] : lower-case v split on the
//	   Java regex "\\W+", empty strings dropped; see [Words]) → groupBy(word) → count() →
//	   toStream → "wc-out" <String,Long>.
//	T2 rekey-agg: stream "orders", value "customer:amount" or null → selectKey(v == null ? k :
//	   customer) → mapValues(Long amount or null) → groupByKey(String, Long) →
//	   reduce(sum) → "orders-total" <String,Long>; count() → "orders-count" <String,Long>;
//	   aggregate("", agg + v + ";") → "orders-agg" <String,String>.
//	T3 stream-table join: stream "clicks", table "users" (materialized);
//	   join (c, u) -> c + "@" + u → "clicks-inner";
//	   leftJoin (c, u) -> c + "@" + (u == null ? "-" : u) → "clicks-left".
//	T4 table-table joins: tables "left-t", "right-t"; joiner (a, b) -> (a ?? "-") + "+" +
//	   (b ?? "-"); join → "tt-inner", leftJoin → "tt-left", outerJoin → "tt-outer".
//	T5 foreign-key join: table "fk-orders" <orderId, "productId:qty">, table "fk-products"
//	   <productId, name>; extractor: text before ':'; joiner (o, p) -> o + "/" + (p ?? "-");
//	   join → "fk-inner", leftJoin → "fk-left".
//	T6 table groupBy with subtractor: table "assign" <user, "region:amount"> →
//	   groupBy((region, Long amount)) → aggregate(0, agg + v, agg - v) → "region-sum";
//	   count() → "region-count"; reduce(a + b, a - b) → "region-reduce" (all <String,Long>).
//	T7 split/merge: stream "events" → split: branch "a" (v starts with "a"), branch "b"
//	   (starts with "b"), default; the a-branch upper-cased, merged with the b-branch →
//	   "merged"; the default branch → "other".
//	T8 timestamp extractors: stream "ts-in" with an extractor giving the value's event
//	   time ("ms:payload"), or the partition time for a value without one (null included)
//	   → "ts-out"; groupByKey → count → "ts-count" <String,Long>; table "ts-table" with an
//	   extractor giving the event time, or the record's timestamp without one (tombstones
//	   included) → toStream → "ts-table-out". One event time in ten is negative: the
//	   record is dropped, as is a record taking the partition time before the first.
//	T9 stream–global-table joins: stream "g-clicks" values "user:item", global table
//	   "g-users"; key mapper: the user (null for null or without ':'); join v + "@" + u →
//	   "g-inner", leftJoin v + "@" + (u ?? "-") → "g-left".
//	T10 join after a key change: stream "r-orders" "user:amount" → selectKey(user, or
//	   the key for null) → join table "r-users" (materialized), v + "@" + u → "r-joined";
//	   Kafka Streams inserts a repartition topic before the join.
//	J1–J4 stream–stream joins (JoinTopologies, JoinInputs): streams "jl-in" and
//	   "jr-in" <String,String>; joiner (a, b) → (a ?? "-") + "+" + (b ?? "-"); J1 join
//	   (JoinWindows.ofTimeDifferenceAndGrace(5 s, 2 s)) → "j-inner"; J2 leftJoin →
//	   "j-left"; J3 outerJoin → "j-outer"; J4 outerJoin of ofTimeDifferenceAndGrace(0,
//	   1 s).before(2 s).after(6 s) → "j-asym". J2–J4 also compare their shared store's
//	   changelog (KSTREAM-OUTERSHARED-0000000004-store), compacted. Run with JoinConfig.
//
//	P1 processor-API word count with caching (ProcessorTopologies): source "pc-in"
//	   <String,String> → processor "count": each word of the line (T1's rule) counted
//	   in the store "pc-counts" <String,Long> built withCachingEnabled(), or deleted
//	   from it for a line keyed "del"; the counts (null: deleted) forwarded when the
//	   store's cache flushes, through its flush listener (Kafka Streams' internal
//	   setFlushListener; eddy's processor.ForwardThroughCache) → "pc-out"
//	   <String,Long>. Its changelog is compared per key in order (ByKey). Both drivers
//	   commit after every input record, so a flush merges the updates one line makes
//	   to one word.
//
// Case mappings in the Java topologies use Locale.ROOT. Java lower-cases "İ" (U+0130) to
// "i" and a combining dot (U+0307), which "\\W+" then splits on, so [Words] does the
// same. T7's generated values avoid the characters whose upper case is more than one
// character in Java (ß → SS, ligatures): Go's strings.ToUpper maps them one to one.
//
// # The line protocol
//
// The JVM reads one JSON request per line on stdin and answers one JSON line on stdout:
//
//	→ {"topology":"T3","input":[{"topic":"clicks","key":B64|null,"value":B64|null,"ts":ms},...],
//	   "config":{"statestore.cache.max.bytes":"0"}}        ("config" optional)
//	← {"outputs":{"clicks-inner":[{"key":B64|null,"value":B64|null,"ts":ms},...],...}}
//	← {"error":"java.lang.IllegalArgumentException: ...","trace":"..."}
//
// Keys and values are the serialized bytes in standard base64 (padded), so bytes are
// kept exactly; JSON null is a null key or value. Every output topic of the topology is
// in "outputs", possibly empty. Each request runs in a fresh TopologyTestDriver with
// default configs, overridden by "config" (StreamsConfig properties). The driver commits
// after every record, yet record caching (on by default) still changes the output in one
// way: a tombstone for a key a cached table does not hold is neither stored nor
// forwarded (CachingKeyValueStore.putAndMaybeForward); with
// statestore.cache.max.bytes=0 the nodes below see it. The JVM ends at the end of stdin.
package kstreams
