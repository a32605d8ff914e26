package io.github.eddystreams.oracle;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The topologies T1-T7 of eddy's differential tests, exactly as integration/kstreams/doc.go
 * (and /work/brief/difftopologies.md) define them. Every serde is given explicitly: the
 * driver runs with default configs, which have no default serdes.
 *
 * <p>Case mappings use Locale.ROOT so that the JVM's locale cannot change the output.
 */
final class Topologies {
  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();

  private Topologies() {}

  /** A topology and the topics it writes, in a stable order. */
  record Built(Topology topology, List<String> outputs) {}

  static Built build(String name) {
    if (name.startsWith("J")) {
      return JoinTopologies.build(name);
    }
    if (name.startsWith("P")) {
      return ProcessorTopologies.build(name);
    }
    return switch (name) {
      case "T1" -> t1();
      case "T2" -> t2();
      case "T3" -> t3();
      case "T4" -> t4();
      case "T5" -> t5();
      case "T6" -> t6();
      case "T7" -> t7();
      case "T8" -> t8();
      case "T9" -> t9();
      case "T10" -> t10();
      case "W1" -> w1();
      case "W2" -> w2();
      case "W3" -> w3();
      case "W4" -> w4();
      case "W5", "W6", "W7", "W8" -> SuppressTopologies.build(name);
      default -> throw new IllegalArgumentException(
          "unknown topology \"" + name + "\": the oracle knows T1 to T10 and W1 to W8");
    };
  }

  /** T1 word count. */
  private static Built t1() {
    StreamsBuilder b = new StreamsBuilder();
    b.stream("wc-in", Consumed.with(S, S))
        .flatMapValues(
            v -> v == null
                ? List.<String>of()
                : Arrays.stream(v.toLowerCase(Locale.ROOT).split("\\W+"))
                    .filter(w -> !w.isEmpty())
                    .toList())
        .groupBy((k, word) -> word, Grouped.with(S, S))
        .count()
        .toStream()
        .to("wc-out", Produced.with(S, L));
    return new Built(b.build(), List.of("wc-out"));
  }

  /** T2 re-keying, then reduce, count and aggregate of one grouped stream. */
  private static Built t2() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, Long> g = b.stream("orders", Consumed.with(S, S))
        .selectKey((k, v) -> v == null ? k : v.substring(0, v.indexOf(':')))
        .mapValues(v -> v == null ? null : Long.parseLong(v.substring(v.indexOf(':') + 1)))
        .groupByKey(Grouped.with(S, L));
    g.reduce(Long::sum, Materialized.with(S, L)).toStream().to("orders-total", Produced.with(S, L));
    g.count().toStream().to("orders-count", Produced.with(S, L));
    g.aggregate(() -> "", (k, v, agg) -> agg + v + ";", Materialized.with(S, S))
        .toStream()
        .to("orders-agg", Produced.with(S, S));
    return new Built(b.build(), List.of("orders-total", "orders-count", "orders-agg"));
  }

  /** T3 stream-table joins, inner and left. */
  private static Built t3() {
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, String> clicks = b.stream("clicks", Consumed.with(S, S));
    KTable<String, String> users = b.table("users", Consumed.with(S, S), Materialized.with(S, S));
    clicks.join(users, (c, u) -> c + "@" + u, Joined.with(S, S, S))
        .to("clicks-inner", Produced.with(S, S));
    clicks.leftJoin(users, (c, u) -> c + "@" + (u == null ? "-" : u), Joined.with(S, S, S))
        .to("clicks-left", Produced.with(S, S));
    return new Built(b.build(), List.of("clicks-inner", "clicks-left"));
  }

  /** T4 table-table joins: inner, left, outer. */
  private static Built t4() {
    StreamsBuilder b = new StreamsBuilder();
    KTable<String, String> left = b.table("left-t", Consumed.with(S, S));
    KTable<String, String> right = b.table("right-t", Consumed.with(S, S));
    ValueJoiner<String, String, String> j = (a, c) -> (a == null ? "-" : a) + "+" + (c == null ? "-" : c);
    left.join(right, j).toStream().to("tt-inner", Produced.with(S, S));
    left.leftJoin(right, j).toStream().to("tt-left", Produced.with(S, S));
    left.outerJoin(right, j).toStream().to("tt-outer", Produced.with(S, S));
    return new Built(b.build(), List.of("tt-inner", "tt-left", "tt-outer"));
  }

  /** T5 foreign-key joins, inner and left. */
  private static Built t5() {
    StreamsBuilder b = new StreamsBuilder();
    KTable<String, String> orders = b.table("fk-orders", Consumed.with(S, S));
    KTable<String, String> products = b.table("fk-products", Consumed.with(S, S));
    ValueJoiner<String, String, String> j = (o, p) -> o + "/" + (p == null ? "-" : p);
    orders.join(products, (String v) -> v.substring(0, v.indexOf(':')), j)
        .toStream().to("fk-inner", Produced.with(S, S));
    orders.leftJoin(products, (String v) -> v.substring(0, v.indexOf(':')), j)
        .toStream().to("fk-left", Produced.with(S, S));
    return new Built(b.build(), List.of("fk-inner", "fk-left"));
  }

  /** T6 table groupBy with adder and subtractor: aggregate, count, reduce. */
  private static Built t6() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedTable<String, Long> g = b.table("assign", Consumed.with(S, S))
        .groupBy(
            (k, v) -> KeyValue.pair(
                v.substring(0, v.indexOf(':')), Long.parseLong(v.substring(v.indexOf(':') + 1))),
            Grouped.with(S, L));
    g.aggregate(() -> 0L, (k, v, agg) -> agg + v, (k, v, agg) -> agg - v, Materialized.with(S, L))
        .toStream()
        .to("region-sum", Produced.with(S, L));
    g.count().toStream().to("region-count", Produced.with(S, L));
    g.reduce((a, c) -> a + c, (a, c) -> a - c, Materialized.with(S, L))
        .toStream()
        .to("region-reduce", Produced.with(S, L));
    return new Built(b.build(), List.of("region-sum", "region-count", "region-reduce"));
  }

  /** T7 split into branches a, b and default; a upper-cased and merged with b. */
  private static Built t7() {
    StreamsBuilder b = new StreamsBuilder();
    Map<String, KStream<String, String>> branches = b.stream("events", Consumed.with(S, S))
        .split(Named.as("split-"))
        .branch((k, v) -> v != null && v.startsWith("a"), Branched.as("a"))
        .branch((k, v) -> v != null && v.startsWith("b"), Branched.as("b"))
        .defaultBranch(Branched.as("default"));
    branches.get("split-a")
        .mapValues(v -> v.toUpperCase(Locale.ROOT))
        .merge(branches.get("split-b"))
        .to("merged", Produced.with(S, S));
    branches.get("split-default").to("other", Produced.with(S, S));
    return new Built(b.build(), List.of("merged", "other"));
  }

  /** The event time of a "ms:payload" value: ms (may be negative); null without one. */
  private static Long eventTime(Object v) {
    if (!(v instanceof String s)) {
      return null;
    }
    int i = s.indexOf(':');
    if (i < 0) {
      return null;
    }
    return Long.parseLong(s.substring(0, i));
  }

  /**
   * T8 timestamp extractors: stream "ts-in" with the value's event time, or the partition time
   * for a value without one (null included); passed through to "ts-out" and counted per key to
   * "ts-count". Table "ts-table" with the value's event time, or the record's own timestamp for a
   * value without one (tombstones included), to "ts-table-out". A negative event time drops the
   * record, as does the partition time before the partition's first record (-1).
   */
  private static Built t8() {
    StreamsBuilder b = new StreamsBuilder();
    TimestampExtractor streamTime = (rec, partitionTime) -> {
      Long t = eventTime(rec.value());
      return t == null ? partitionTime : t;
    };
    TimestampExtractor tableTime = (rec, partitionTime) -> {
      Long t = eventTime(rec.value());
      return t == null ? rec.timestamp() : t;
    };
    KStream<String, String> in = b.stream("ts-in", Consumed.with(S, S).withTimestampExtractor(streamTime));
    in.to("ts-out", Produced.with(S, S));
    in.groupByKey(Grouped.with(S, S)).count().toStream().to("ts-count", Produced.with(S, L));
    b.table("ts-table", Consumed.with(S, S).withTimestampExtractor(tableTime))
        .toStream()
        .to("ts-table-out", Produced.with(S, S));
    return new Built(b.build(), List.of("ts-out", "ts-count", "ts-table-out"));
  }

  /**
   * T9 stream-global-table joins: stream "g-clicks" values "user:item", global table "g-users";
   * the key mapper takes the user (null for a null value or one without ':'); join v + "@" + u
   * to "g-inner", leftJoin v + "@" + (u ?? "-") to "g-left".
   */
  private static Built t9() {
    StreamsBuilder b = new StreamsBuilder();
    GlobalKTable<String, String> users = b.globalTable("g-users", Consumed.with(S, S));
    KStream<String, String> clicks = b.stream("g-clicks", Consumed.with(S, S));
    KeyValueMapper<String, String, String> user =
        (k, v) -> v == null || v.indexOf(':') < 0 ? null : v.substring(0, v.indexOf(':'));
    clicks.join(users, user, (v, u) -> v + "@" + u).to("g-inner", Produced.with(S, S));
    clicks.leftJoin(users, user, (v, u) -> v + "@" + (u == null ? "-" : u)).to("g-left", Produced.with(S, S));
    return new Built(b.build(), List.of("g-inner", "g-left"));
  }

  /**
   * T10 a join after a key change: stream "r-orders" values "user:amount" re-keyed by user
   * (selectKey; the key for a null value), joined with table "r-users" (Kafka Streams inserts
   * a repartition topic): v + "@" + u to "r-joined".
   */
  private static Built t10() {
    StreamsBuilder b = new StreamsBuilder();
    KTable<String, String> users = b.table("r-users", Consumed.with(S, S), Materialized.with(S, S));
    b.stream("r-orders", Consumed.with(S, S))
        .selectKey((k, v) -> v == null || v.indexOf(':') < 0 ? k : v.substring(0, v.indexOf(':')))
        .join(users, (v, u) -> v + "@" + u, Joined.with(S, S, S))
        .to("r-joined", Produced.with(S, S));
    return new Built(b.build(), List.of("r-joined"));
  }

  /** A window store's Materialized with String keys. */
  private static <V> Materialized<String, V, WindowStore<Bytes, byte[]>> windowStore(String name, Serde<V> values) {
    return Materialized.<String, V, WindowStore<Bytes, byte[]>>as(name).withKeySerde(S).withValueSerde(values);
  }

  /** A session store's Materialized with String keys. */
  private static <V> Materialized<String, V, SessionStore<Bytes, byte[]>> sessionStore(String name, Serde<V> values) {
    return Materialized.<String, V, SessionStore<Bytes, byte[]>>as(name).withKeySerde(S).withValueSerde(values);
  }

  /** The changelog topic of a store of topology name, as the driver names it (application id oracle-name). */
  static String changelog(String topology, String store) {
    return "oracle-" + topology + "-" + store + "-changelog";
  }

  /**
   * W1 time windows: tumbling count (10 s, grace 5 s), hopping aggregate (30 s every 10 s,
   * grace 10 s), tumbling reduce (10 s, no grace) of the non-null values; windowed keys
   * written with TimeWindowedSerde.
   */
  private static Built w1() {
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, String> in = b.stream("win-in", Consumed.with(S, S));
    KGroupedStream<String, String> g = in.groupByKey(Grouped.with(S, S));
    g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
        .count(windowStore("tumble-count", L))
        .toStream()
        .to("tumble-count", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), L));
    g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(30), Duration.ofSeconds(10)).advanceBy(Duration.ofSeconds(10)))
        .aggregate(() -> "", (k, v, agg) -> agg + v + ";", windowStore("hop-agg", S))
        .toStream()
        .to("hop-agg", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 30_000), S));
    in.filter((k, v) -> v != null)
        .groupByKey(Grouped.with(S, S))
        .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
        .reduce((a, c) -> a + "," + c, windowStore("tumble-reduce", S))
        .toStream()
        .to("tumble-reduce", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), S));
    return new Built(b.build(), List.of("tumble-count", "hop-agg", "tumble-reduce",
        changelog("W1", "tumble-count"), changelog("W1", "hop-agg"), changelog("W1", "tumble-reduce")));
  }

  /** W2 sliding windows (10 s, grace 5 s): count and aggregate. */
  private static Built w2() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, String> g = b.stream("slide-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
    var w = g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)));
    w.count(windowStore("slide-count", L))
        .toStream()
        .to("slide-count", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), L));
    w.aggregate(() -> "", (k, v, agg) -> agg + v + ";", windowStore("slide-agg", S))
        .toStream()
        .to("slide-agg", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), S));
    return new Built(b.build(), List.of("slide-count", "slide-agg",
        changelog("W2", "slide-count"), changelog("W2", "slide-agg")));
  }

  /** W3 session windows (gap 5 s, grace 5 s): count and aggregate with a merger. */
  private static Built w3() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, String> g = b.stream("sess-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
    var w = g.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(5)));
    w.count(sessionStore("session-count", L))
        .toStream()
        .to("session-count", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
    w.aggregate(() -> "", (k, v, agg) -> agg + v + ";", (k, a, c) -> a + c, sessionStore("session-agg", S))
        .toStream()
        .to("session-agg", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), S));
    return new Built(b.build(), List.of("session-count", "session-agg",
        changelog("W3", "session-count"), changelog("W3", "session-agg")));
  }

  /**
   * W4 session windows as W3 with stores kept 2 minutes (Materialized.withRetention), so
   * that no session expires from the store before the processor's grace check drops its
   * records: then Kafka Streams' record cache (which returns sessions from its read cache
   * after they expired in the store) changes nothing, and the cached output compares.
   */
  private static Built w4() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, String> g = b.stream("sess-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
    var w = g.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(5)));
    w.count(sessionStore("session-count-r", L).withRetention(Duration.ofMinutes(2)))
        .toStream()
        .to("session-count-r", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
    w.aggregate(() -> "", (k, v, agg) -> agg + v + ";", (k, a, c) -> a + c,
            sessionStore("session-agg-r", S).withRetention(Duration.ofMinutes(2)))
        .toStream()
        .to("session-agg-r", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), S));
    return new Built(b.build(), List.of("session-count-r", "session-agg-r",
        changelog("W4", "session-count-r"), changelog("W4", "session-agg-r")));
  }
}
