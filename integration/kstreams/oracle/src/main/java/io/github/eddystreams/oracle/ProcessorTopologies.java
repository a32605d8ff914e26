package io.github.eddystreams.oracle;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.internals.InternalProcessorContext;
import org.apache.kafka.streams.processor.internals.ProcessorNode;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.internals.CacheFlushListener;
import org.apache.kafka.streams.state.internals.WrappedStateStore;

/**
 * The processor-API topologies of eddy's differential tests (see
 * integration/kstreams/doc.go). P1 counts the words of each line in a processor-API store
 * built withCachingEnabled() and forwards the counts only when the store's record cache
 * flushes: Kafka Streams' processor API has no public way to do that, so the processor
 * registers the flush listener its DSL tables use (CachedStateStore.setFlushListener,
 * internal API, as KTableSource does with TimestampedCacheFlushListener), which is what
 * eddy's processor.ForwardThroughCache stands for.
 */
final class ProcessorTopologies {
  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();

  private ProcessorTopologies() {}

  static Topologies.Built build(String name) {
    if (!name.equals("P1")) {
      throw new IllegalArgumentException("unknown topology \"" + name + "\": the oracle's processor-API topology is P1");
    }
    Topology t = new Topology();
    t.addSource("lines", S.deserializer(), S.deserializer(), "pc-in");
    t.addProcessor("count", Counter::new, "lines");
    t.addStateStore(
        Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("pc-counts"), S, L).withCachingEnabled(),
        "count");
    t.addSink("out", "pc-out", S.serializer(), L.serializer(), "count");
    return new Topologies.Built(t, List.of("pc-out", "oracle-P1-pc-counts-changelog"));
  }

  /**
   * Counts the words (T1's rule) of each line in "pc-counts"; a line keyed "del" deletes
   * its words instead. Forwards nothing itself: the store's flush listener forwards each
   * key's latest value (null: deleted) with the context of its latest update.
   */
  static final class Counter implements Processor<String, String, String, Long> {
    private KeyValueStore<String, Long> counts;

    @Override
    @SuppressWarnings("unchecked")
    public void init(ProcessorContext<String, Long> context) {
      counts = context.getStateStore("pc-counts");
      InternalProcessorContext<String, Long> ic = (InternalProcessorContext<String, Long>) context;
      ProcessorNode<?, ?, ?, ?> self = ic.currentNode();
      CacheFlushListener<String, Long> forward = rec -> {
        ProcessorNode<?, ?, ?, ?> prev = ic.currentNode();
        ic.setCurrentNode(self);
        try {
          ic.forward(rec.withValue(rec.value().newValue));
        } finally {
          ic.setCurrentNode(prev);
        }
      };
      if (!((WrappedStateStore<?, String, Long>) counts).setFlushListener(forward, false)) {
        throw new IllegalStateException("store pc-counts has no record cache");
      }
    }

    @Override
    public void process(Record<String, String> r) {
      if (r.value() == null) {
        return;
      }
      for (String w : r.value().toLowerCase(Locale.ROOT).split("\\W+")) {
        if (w.isEmpty()) {
          continue;
        }
        Long n = counts.get(w);
        if ("del".equals(r.key())) {
          if (n != null) {
            counts.delete(w);
          }
        } else {
          counts.put(w, n == null ? 1 : n + 1);
        }
      }
    }
  }
}
