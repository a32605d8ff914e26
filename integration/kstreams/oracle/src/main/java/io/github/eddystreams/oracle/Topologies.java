package io.github.eddystreams.oracle;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
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
import org.apache.kafka.streams.kstream.ValueJoiner;

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
      default -> throw new IllegalArgumentException(
          "unknown topology \"" + name + "\": the oracle knows T1 to T10");
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
}
