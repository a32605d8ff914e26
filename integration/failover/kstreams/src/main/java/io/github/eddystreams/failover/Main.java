package io.github.eddystreams.failover;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.LagInfo;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.StandbyUpdateListener;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.internals.DefaultKafkaClientSupplier;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer of integration/failover's child: every input record is put in
 * the persistent key-value store "kv" (logged to its changelog, record caching off as
 * Stores' builders leave it), exactly_once_v2, commit.interval.ms 100 (eddy's and
 * Kafka Streams' exactly-once default). It prints on stdout the JSON lines the driver
 * reads from an eddy child (main.go's event):
 *
 * <ul>
 *   <li>"first": a task's first record on this instance (per processor instance: Kafka
 *       Streams makes new processors when it opens a task anew), then "tick": a record
 *       at most every 50 ms;
 *   <li>"restored": a store restore's total records and time (StateRestoreListener's
 *       onRestoreEnd, or onRestoreSuspended when the task moved away mid-restore);
 *   <li>"status" every 500 ms: the active tasks assigned here and not restoring, the
 *       standby (and warm-up) tasks, their offset lag (allLocalStorePartitionLags), and
 *       the group generation the main consumer last saw (read in its poll, on the
 *       stream thread, since a KafkaConsumer is single-threaded).
 * </ul>
 *
 * <p>Arguments: brokers applicationId input stateDir standbys instanceId sessionTimeoutMs
 * ("-" for instanceId: dynamic membership; 0 for sessionTimeoutMs: Kafka Streams'
 * default, 45 s). Everything else is Kafka Streams' default: 1 stream thread, classic
 * group protocol with its cooperative HA assignor (acceptable.recovery.lag 10,000,
 * max.warmup.replicas 2, probing.rebalance.interval.ms 10 min), and a close that does
 * not leave the group. SIGTERM closes the application (the JVM's shutdown hook).
 */
public final class Main {
    static final String STORE = "kv";
    static final long TICK_NANOS = 50_000_000L;

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: Main brokers applicationId input stateDir standbys instanceId|- sessionTimeoutMs|0");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        String input = args[2];
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(args[4]));
        if (!args[5].equals("-")) {
            p.put(StreamsConfig.consumerPrefix("group.instance.id"), args[5]);
        }
        if (Integer.parseInt(args[6]) > 0) {
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), Integer.parseInt(args[6]));
        }
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);

        Set<String> restoring = ConcurrentHashMap.newKeySet();
        Topology t = new Topology();
        t.addSource("in", Serdes.String().deserializer(), Serdes.ByteArray().deserializer(), input);
        t.addProcessor("put", Putter::new, "in");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.ByteArray()), "put");

        AtomicInteger generation = new AtomicInteger();
        KafkaStreams streams = new KafkaStreams(t, p, new DefaultKafkaClientSupplier() {
            @Override
            public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
                return new GenerationConsumer(config, generation);
            }
        });
        streams.setGlobalStateRestoreListener(new Restores(restoring));
        streams.setStandbyUpdateListener(new Standbys());
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, old) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                System.err.println("kstreams-failover: state " + old + " -> " + now);
                closed.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofMinutes(1));
            closed.countDown();
        }));
        streams.start();
        Thread status = new Thread(() -> {
            while (closed.getCount() > 0) {
                try {
                    Thread.sleep(500);
                    emit(status(streams, restoring, generation.get()));
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    System.err.println("kstreams-failover: status: " + e);
                }
            }
        });
        status.setDaemon(true);
        status.start();
        closed.await();
    }

    static String status(KafkaStreams streams, Set<String> restoring, int generation) {
        List<String> active = new ArrayList<>();
        List<Integer> standby = new ArrayList<>();
        for (ThreadMetadata th : streams.metadataForLocalThreads()) {
            for (TaskMetadata tm : th.activeTasks()) {
                if (!restoring.contains(tm.taskId().toString())) {
                    active.add(tm.taskId().toString());
                }
            }
            for (TaskMetadata tm : th.standbyTasks()) {
                standby.add(tm.taskId().partition());
            }
        }
        long lag = 0;
        if (!standby.isEmpty()) {
            Map<Integer, LagInfo> lags = streams.allLocalStorePartitionLags().getOrDefault(STORE, Map.of());
            for (int part : standby) {
                LagInfo li = lags.get(part);
                if (li != null) {
                    lag += li.offsetLag();
                }
            }
        }
        Collections.sort(active);
        StringBuilder b = new StringBuilder("{\"kind\":\"status\",\"active\":[");
        for (int i = 0; i < active.size(); i++) {
            b.append(i > 0 ? ",\"" : "\"").append(active.get(i)).append('"');
        }
        return b.append("],\"standby\":").append(standby.size()).append(",\"standby_running\":").append(standby.size())
                .append(",\"standby_lag\":").append(lag).append(",\"generation\":").append(generation).append('}').toString();
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static long nowNanos() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    /** The task of a changelog partition: this topology has one subtopology, 0. */
    static String task(TopicPartition tp) {
        return "0_" + tp.partition();
    }

    /** Puts every record in "kv" and reports the task's first record, then ticks. */
    static final class Putter implements Processor<String, byte[], Void, Void> {
        private KeyValueStore<String, byte[]> kv;
        private String task;
        private long lastTick;
        private boolean seen;

        @Override
        public void init(ProcessorContext<Void, Void> ctx) {
            kv = ctx.getStateStore(STORE);
            task = ctx.taskId().toString();
        }

        @Override
        public void process(Record<String, byte[]> r) {
            long now = System.nanoTime();
            if (!seen) {
                seen = true;
                lastTick = now;
                emit("{\"kind\":\"first\",\"task\":\"" + task + "\",\"at\":" + nowNanos() + "}");
            } else if (now - lastTick >= TICK_NANOS) {
                lastTick = now;
                emit("{\"kind\":\"tick\",\"task\":\"" + task + "\",\"at\":" + nowNanos() + "}");
            }
            kv.put(r.key(), r.value());
        }
    }

    /** Reports each store restore's records and time, and which tasks are restoring. */
    static final class Restores implements StateRestoreListener {
        private final Set<String> restoring;
        private final Map<TopicPartition, Long> started = new ConcurrentHashMap<>();

        Restores(Set<String> restoring) {
            this.restoring = restoring;
        }

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long from, long to) {
            System.err.println("kstreams-failover: restore " + tp + " from offset " + from + " to " + to);
            started.put(tp, System.nanoTime());
            restoring.add(task(tp));
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
        }

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            done(tp, store, total);
        }

        @Override
        public void onRestoreSuspended(TopicPartition tp, String store, long total) {
            done(tp, store, total);
        }

        private void done(TopicPartition tp, String store, long total) {
            Long began = started.remove(tp);
            long ms = began == null ? 0 : (System.nanoTime() - began) / 1_000_000L;
            restoring.remove(task(tp));
            if (store.equals(STORE)) {
                emit("{\"kind\":\"restored\",\"task\":\"" + task(tp) + "\",\"records\":" + total + ",\"ms\":" + ms + "}");
            }
        }
    }

    /**
     * Says on stderr where a standby stopped (its store's offset against the changelog's
     * end) when it is promoted or moved: what the active task then restores.
     */
    static final class Standbys implements StandbyUpdateListener {
        @Override
        public void onUpdateStart(TopicPartition tp, String store, long startingOffset) {
        }

        @Override
        public void onBatchLoaded(TopicPartition tp, String store, org.apache.kafka.streams.processor.TaskId task, long batchEndOffset, long batchSize, long currentEndOffset) {
        }

        @Override
        public void onUpdateSuspended(TopicPartition tp, String store, long storeOffset, long currentEndOffset, SuspendReason reason) {
            System.err.println("kstreams-failover: standby " + tp + " " + reason + " at offset " + storeOffset + " of " + currentEndOffset);
        }
    }

    /** The main consumer, recording the group generation after each poll. */
    static final class GenerationConsumer extends KafkaConsumer<byte[], byte[]> {
        private final AtomicInteger generation;

        GenerationConsumer(Map<String, Object> config, AtomicInteger generation) {
            super(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.generation = generation;
        }

        @Override
        public ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
            ConsumerRecords<byte[], byte[]> r = super.poll(timeout);
            generation.set(groupMetadata().generationId());
            return r;
        }
    }
}
