package io.github.eddystreams.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The oracle's line protocol (one JVM serves many cases):
 *
 * <pre>
 * request  (one line on stdin):
 *   {"topology":"T3","input":[{"topic":"clicks","key":B64|null,"value":B64|null,"ts":123},...],
 *    "config":{"statestore.cache.max.bytes":"0"}}      (config optional: StreamsConfig overrides)
 * response (one line on stdout):
 *   {"outputs":{"clicks-inner":[{"key":B64|null,"value":B64|null,"ts":123},...],...}}
 *   {"error":"what went wrong"}
 * </pre>
 *
 * Keys and values are the serialized bytes, standard base64 with padding; JSON null is a null
 * key or value (a tombstone). Timestamps are milliseconds since the epoch. Every output topic
 * of the topology is in "outputs", in the order written, empty if nothing was written. Each
 * request runs in a fresh TopologyTestDriver with default configs, which commits after every
 * record. The process ends at the end of stdin.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws IOException {
    // stdout carries the protocol only: whatever else prints goes to stderr.
    PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    System.setOut(System.err);
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    Path stateRoot = Files.createTempDirectory("kstreams-oracle-");
    int n = 0;
    for (String line; (line = in.readLine()) != null; ) {
      if (line.isBlank()) {
        continue;
      }
      ObjectNode resp;
      try {
        resp = run(json, json.readTree(line), stateRoot.resolve(Integer.toString(n++)));
      } catch (Exception | AssertionError e) {
        resp = json.createObjectNode();
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        resp.put("error", e.toString());
        resp.put("trace", trace.toString());
      }
      protocol.println(json.writeValueAsString(resp));
      protocol.flush();
    }
  }

  private static ObjectNode run(ObjectMapper json, JsonNode req, Path stateDir) {
    String name = text(req, "topology");
    JsonNode input = req.get("input");
    if (input == null || !input.isArray()) {
      throw new IllegalArgumentException("request has no \"input\" array");
    }
    Topologies.Built built = Topologies.build(name);
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, "oracle-" + name);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    // In-memory stores instead of RocksDB: the driver commits after every record, and
    // RocksDB's flush per commit made a 200-record case take ~10 s. Key-value stores give
    // the same results either way (no topology here depends on a store's iteration order
    // beyond what both keep: sorted by key bytes).
    props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
    // Emit-on-window-close checks for closed windows at every record, as eddy does (the
    // default throttles it to once per second of wall-clock time, which the driver's does not
    // advance); see SuppressTopologies.
    props.put("__emit.interval.ms.kstreams.windowed.aggregation__", "0");
    JsonNode config = req.get("config");
    if (config != null && !config.isNull()) {
      if (!config.isObject()) {
        throw new IllegalArgumentException("\"config\" must be an object of StreamsConfig properties");
      }
      config.fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
    }
    ObjectNode outputs = json.createObjectNode();
    try (TopologyTestDriver driver = new TopologyTestDriver(built.topology(), props)) {
      Map<String, TestInputTopic<byte[], byte[]>> inputs = new HashMap<>();
      Map<String, TestOutputTopic<byte[], byte[]>> outs = new HashMap<>();
      for (String topic : built.outputs()) {
        outs.put(topic, driver.createOutputTopic(topic, new ByteArrayDeserializer(), new ByteArrayDeserializer()));
      }
      int i = 0;
      for (JsonNode rec : input) {
        String topic = text(rec, "topic");
        JsonNode ts = rec.get("ts");
        if (ts == null || !ts.canConvertToLong()) {
          throw new IllegalArgumentException("input record " + i + " has no integer \"ts\"");
        }
        TestInputTopic<byte[], byte[]> t = inputs.computeIfAbsent(
            topic, x -> driver.createInputTopic(x, new ByteArraySerializer(), new ByteArraySerializer()));
        t.pipeInput(bytes(rec, "key", i), bytes(rec, "value", i), ts.asLong());
        i++;
      }
      for (String topic : built.outputs()) {
        ArrayNode list = outputs.putArray(topic);
        for (TestRecord<byte[], byte[]> r : outs.get(topic).readRecordsToList()) {
          ObjectNode o = list.addObject();
          put(o, "key", r.key());
          put(o, "value", r.value());
          o.put("ts", r.timestamp());
        }
      }
    }
    ObjectNode resp = json.createObjectNode();
    resp.set("outputs", outputs);
    return resp;
  }

  private static String text(JsonNode node, String field) {
    JsonNode v = node.get(field);
    if (v == null || !v.isTextual()) {
      throw new IllegalArgumentException("missing string field \"" + field + "\" in " + node);
    }
    return v.asText();
  }

  private static byte[] bytes(JsonNode rec, String field, int i) {
    JsonNode v = rec.get(field);
    if (v == null || v.isNull()) {
      return null;
    }
    if (!v.isTextual()) {
      throw new IllegalArgumentException("input record " + i + ": \"" + field + "\" must be base64 or null");
    }
    return Base64.getDecoder().decode(v.asText());
  }

  private static void put(ObjectNode o, String field, byte[] b) {
    if (b == null) {
      o.putNull(field);
    } else {
      o.put(field, Base64.getEncoder().encodeToString(b));
    }
  }
}
