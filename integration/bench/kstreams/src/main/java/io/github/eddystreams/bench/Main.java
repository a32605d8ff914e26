package io.github.eddystreams.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.WindowStore;

/**
 * One Kafka Streams row of integration/bench: runs a topology until SIGTERM, sampling its
 * open sockets, file descriptors and threads every 100 ms; at SIGTERM it prints
 * "BENCH-RESULT {json}" on stdout (the bench child's result line), then closes.
 *
 * <p>Arguments: brokers applicationId input output commitIntervalMs stateDir topology
 * threads cache status. cache "off" sets statestore.cache.max.bytes to 0, so that every update
 * is forwarded, as eddy's uncached rows do (the like-for-like rows); "default" leaves it
 * unset, Kafka Streams' default of 10 MB per instance (the rows as users run them).
 * status "status" prints a line "BENCH-STATUS {json}" every 100 ms when the instance's
 * state or active tasks changed, and every second (the scale rows: integration/bench
 * scale.go reads State, Active, Running, Goroutines — JVM threads — and Sockets);
 * "nostatus" does not.
 * Topologies:
 *
 * <ul>
 *   <li>"count": the input's keys counted in the store "kv" (eddy's count topology);
 *   <li>"wordcount": Kafka Streams' WordCountDemo as eddy's examples/wordcount: lines
 *       split into lower-cased runs of letters and digits, grouped by word through the
 *       repartition topic "&lt;app&gt;-words-repartition", counted in the store "counts";
 *   <li>"win-count": the input's keys counted per 1-minute tumbling window without
 *       grace (eddy's win-count), keys written as TimeWindowedSerde writes them.
 * </ul>
 *
 * <p>Repartition topics are not purged (repartition.purge.interval.ms is a day): the
 * bench reads their tails to see when the group committed them, and a purge racing that
 * read could make it fail (not tried). eddy purges its repartition topics every 30 s (a
 * DeleteRecords per task), so this spares Kafka Streams a little work eddy does.
 */
public final class Main {
    private static volatile int socketsPeak, threadsPeak;

    public static void main(String[] args) throws Exception {
        if (args.length != 10 || !(args[8].equals("off") || args[8].equals("default"))
                || !(args[9].equals("status") || args[9].equals("nostatus"))) {
            System.err.println("usage: Main brokers applicationId input output commitIntervalMs stateDir topology threads cache(off|default) status(status|nostatus)");
            System.exit(2);
        }
        String brokers = args[0], app = args[1], input = args[2], output = args[3];
        long commitMs = Long.parseLong(args[4]);
        String stateDir = args[5], topology = args[6];
        int threads = Integer.parseInt(args[7]);
        boolean cacheOff = args[8].equals("off");
        boolean status = args[9].equals("status");

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        if (cacheOff) {
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        }
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, Duration.ofDays(1).toMillis());
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder b = new StreamsBuilder();
        switch (topology) {
            case "count":
                b.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .groupByKey(Grouped.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .count(Materialized.as("kv"))
                        .toStream()
                        .to(output, Produced.with(Serdes.ByteArray(), Serdes.Long()));
                break;
            case "wordcount":
                // eddy's wordcount.Words: lower-case, then runs of letters and digits.
                Pattern separators = Pattern.compile("[^\\p{L}\\p{Nd}]+");
                b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                        .flatMapValues(line -> Arrays.stream(separators.split(line.toLowerCase(Locale.ROOT)))
                                .filter(w -> !w.isEmpty()).toList())
                        .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                        .count(Materialized.as("counts"))
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            case "win-count":
            case "win-count-ret2h":
                // win-count-ret2h (a diagnostic): the store keeps 2 hours instead of the
                // default size + grace (1 minute), so its segments (one RocksDB each,
                // max(retention / 2, 1 minute) of stream time) are 2 instead of 60.
                Materialized<byte[], Long, WindowStore<Bytes, byte[]>> win = Materialized.as("win");
                if (topology.equals("win-count-ret2h")) {
                    win = win.withRetention(Duration.ofHours(2));
                }
                b.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .groupByKey(Grouped.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)))
                        .count(win)
                        .toStream()
                        .to(output, Produced.with(
                                WindowedSerdes.timeWindowedSerdeFrom(byte[].class, Duration.ofMinutes(1).toMillis()),
                                Serdes.Long()));
                break;
            default:
                System.err.println("unknown topology " + topology + " (count, wordcount, win-count)");
                System.exit(2);
        }

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch closed = new CountDownLatch(1);
        Thread sampler = new Thread(() -> {
            String last = "";
            long printed = 0;
            while (closed.getCount() > 0) {
                int[] now = sample();
                if (status) {
                    KafkaStreams.State state = streams.state();
                    int active = 0;
                    try {
                        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                            active += t.activeTasks().size();
                        }
                    } catch (RuntimeException e) {
                        // not started or closing: no tasks
                    }
                    int running = state == KafkaStreams.State.RUNNING ? active : 0;
                    String key = state + "/" + active + "/" + running;
                    long t = System.currentTimeMillis();
                    if (!key.equals(last) || t - printed >= 1000) {
                        System.out.println("BENCH-STATUS {\"At\":" + t * 1_000_000L + ",\"State\":\"" + state
                                + "\",\"Active\":" + active + ",\"Running\":" + running + ",\"Goroutines\":" + now[2]
                                + ",\"Sockets\":" + now[0] + "}");
                        System.out.flush();
                        last = key;
                        printed = t;
                    }
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "bench-sampler");
        sampler.setDaemon(true);
        sampler.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            int[] now = sample();
            int tasks = 0;
            try {
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    tasks += t.activeTasks().size();
                }
            } catch (RuntimeException e) {
                System.err.println("task metadata: " + e);
            }
            System.out.println("BENCH-RESULT {\"Sockets\":" + now[0] + ",\"SocketsPeak\":" + socketsPeak
                    + ",\"FDs\":" + now[1] + ",\"Goroutines\":" + now[2] + ",\"GoroutinesPeak\":" + threadsPeak
                    + ",\"TaskStarts\":" + tasks + "}");
            System.out.flush();
            streams.close(Duration.ofSeconds(30));
            closed.countDown();
        }, "bench-shutdown"));
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("stream thread failed: " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        closed.await();
    }

    /** Returns {sockets, fds, threads} now and keeps the peaks. */
    private static synchronized int[] sample() {
        int sockets = 0, fds = 0;
        try (Stream<Path> s = Files.list(Paths.get("/proc/self/fd"))) {
            for (Path fd : (Iterable<Path>) s::iterator) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    fds++;
                    if (target.startsWith("socket:")) {
                        sockets++;
                    }
                } catch (IOException e) {
                    // closed meanwhile
                }
            }
        } catch (IOException e) {
            System.err.println("list /proc/self/fd: " + e);
        }
        int threads = ManagementFactory.getThreadMXBean().getThreadCount();
        socketsPeak = Math.max(socketsPeak, sockets);
        threadsPeak = Math.max(threadsPeak, threads);
        return new int[] {sockets, fds, threads};
    }
}
