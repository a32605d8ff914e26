package io.github.eddystreams.oracle;

import java.time.Duration;
import java.util.List;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The final-results topologies W5-W8 of eddy's differential tests (suppression and
 * emit-on-window-close), as integration/kstreams/eddytopo/w_suppress.go defines them.
 * Main sets the internal emit interval of emit-on-window-close to 0, so the check runs
 * at every record as eddy's does (its default throttles it to once per second of the
 * driver's wall-clock time, which does not advance).
 */
final class SuppressTopologies {
  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();

  private SuppressTopologies() {}

  static Topologies.Built build(String name) {
    return switch (name) {
      case "W5" -> w5();
      case "W6" -> w6();
      case "W7" -> w7();
      case "W8" -> w8();
      default -> throw new IllegalArgumentException("unknown topology \"" + name + "\"");
    };
  }

  private static <V> Materialized<String, V, WindowStore<Bytes, byte[]>> windows(Serde<V> values) {
    return Materialized.<String, V, WindowStore<Bytes, byte[]>>with(S, values);
  }

  private static <V> Materialized<String, V, SessionStore<Bytes, byte[]>> sessions(Serde<V> values) {
    return Materialized.<String, V, SessionStore<Bytes, byte[]>>with(S, values).withRetention(Duration.ofMinutes(2));
  }

  /** W5 final results of time windows: tumbling count, hopping aggregate. */
  private static Topologies.Built w5() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, String> g = b.stream("fin-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
    g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
        .count(windows(L))
        .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
        .toStream()
        .to("fin-tumble", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), L));
    g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(30), Duration.ofSeconds(10)).advanceBy(Duration.ofSeconds(10)))
        .aggregate(() -> "", (k, v, agg) -> agg + v + ";", windows(S))
        .suppress(Suppressed.untilWindowCloses(BufferConfig.maxRecords(1000).shutDownWhenFull()))
        .toStream()
        .to("fin-hop", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 30_000), S));
    return new Topologies.Built(b.build(), List.of("fin-tumble", "fin-hop"));
  }

  /** W6 final results of sessions (stores kept 2 minutes): count, aggregate with a merger. */
  private static Topologies.Built w6() {
    StreamsBuilder b = new StreamsBuilder();
    var w = b.stream("fin-sess-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S))
        .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(5)));
    w.count(sessions(L))
        .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
        .toStream()
        .to("fin-session-count", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
    w.aggregate(() -> "", (k, v, agg) -> agg + v + ";", (k, a, c) -> a + c, sessions(S))
        .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()).withName("fin-sess-agg-suppress"))
        .toStream()
        .to("fin-session-agg", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), S));
    return new Topologies.Built(b.build(), List.of("fin-session-count", "fin-session-agg"));
  }

  /** W7 emitStrategy(onWindowClose) on tumbling, sliding and session windows (stores kept 2 minutes). */
  private static Topologies.Built w7() {
    StreamsBuilder b = new StreamsBuilder();
    KGroupedStream<String, String> g = b.stream("close-in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
    g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
        .emitStrategy(EmitStrategy.onWindowClose())
        .count(windows(L).withRetention(Duration.ofMinutes(2)))
        .toStream()
        .to("close-tumble", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), L));
    g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
        .emitStrategy(EmitStrategy.onWindowClose())
        .count(windows(L).withRetention(Duration.ofMinutes(2)))
        .toStream()
        .to("close-slide", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), L));
    g.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(5)))
        .emitStrategy(EmitStrategy.onWindowClose())
        .count(sessions(L))
        .toStream()
        .to("close-session", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
    return new Topologies.Built(b.build(), List.of("close-tumble", "close-slide", "close-session"));
  }

  /** W8 untilTimeLimit with bounded buffers that emit early: a count, and the stream as a table. */
  private static Topologies.Built w8() {
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, String> in = b.stream("limit-in", Consumed.with(S, S));
    in.groupByKey(Grouped.with(S, S))
        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>with(S, L))
        .suppress(Suppressed.untilTimeLimit(Duration.ofSeconds(10), BufferConfig.maxRecords(2).emitEarlyWhenFull()))
        .toStream()
        .to("limit-count", Produced.with(S, L));
    in.toTable(Materialized.<String, String, KeyValueStore<Bytes, byte[]>>with(S, S))
        .suppress(Suppressed.untilTimeLimit(Duration.ofSeconds(5), BufferConfig.maxRecords(3).emitEarlyWhenFull()))
        .toStream()
        .to("limit-table", Produced.with(S, S));
    return new Topologies.Built(b.build(), List.of("limit-count", "limit-table"));
  }
}
