package io.github.eddystreams.oracle;

import java.time.Duration;
import java.util.List;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * The stream-stream join topologies J1-J4 of eddy's differential tests (see
 * integration/kstreams/doc.go): streams "jl-in" and "jr-in" of String keys and values,
 * joined within JoinWindows, the joiner rendering a missing side as "-". Left and outer
 * joins also list their shared store's changelog (the unmatched records waiting for their
 * windows to close). Run them with the emit interval of the spurious-result fix at 0
 * ("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", see JoinConfig in
 * gen_join.go): with a throttle by wall-clock time the output would depend on the clock.
 */
final class JoinTopologies {
  private static final Serde<String> S = Serdes.String();

  private JoinTopologies() {}

  static Topologies.Built build(String name) {
    StreamsBuilder b = new StreamsBuilder();
    KStream<String, String> l = b.stream("jl-in", Consumed.with(S, S));
    KStream<String, String> r = b.stream("jr-in", Consumed.with(S, S));
    JoinWindows w = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(2));
    StreamJoined<String, String, String> sj = StreamJoined.with(S, S, S);
    String shared = "oracle-" + name + "-KSTREAM-OUTERSHARED-0000000004-store-changelog";
    switch (name) {
      case "J1" -> {
        l.join(r, (a, c) -> a + "+" + c, w, sj).to("j-inner", Produced.with(S, S));
        return new Topologies.Built(b.build(), List.of("j-inner"));
      }
      case "J2" -> {
        l.leftJoin(r, (a, c) -> a + "+" + or(c), w, sj).to("j-left", Produced.with(S, S));
        return new Topologies.Built(b.build(), List.of("j-left", shared));
      }
      case "J3" -> {
        l.outerJoin(r, (a, c) -> or(a) + "+" + or(c), w, sj).to("j-outer", Produced.with(S, S));
        return new Topologies.Built(b.build(), List.of("j-outer", shared));
      }
      case "J4" -> {
        JoinWindows asym = JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO, Duration.ofSeconds(1))
            .before(Duration.ofSeconds(2)).after(Duration.ofSeconds(6));
        l.outerJoin(r, (a, c) -> or(a) + "+" + or(c), asym, sj).to("j-asym", Produced.with(S, S));
        return new Topologies.Built(b.build(), List.of("j-asym", shared));
      }
      default -> throw new IllegalArgumentException(
          "unknown topology \"" + name + "\": the oracle's joins are J1 to J4");
    }
  }

  private static String or(String s) {
    return s == null ? "-" : s;
  }
}
