//go:build linux

package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The Kafka Streams rows run the Maven project under kstreams/ (embedded here) as their
// child: the same topology as eddy's row, on the same broker and input, measured from
// outside alike (committed offsets, CPU time and VmHWM of the process); the JVM
// reports its sockets, descriptors and threads on SIGTERM as an eddy child does.

//go:embed kstreams/pom.xml kstreams/src
var kstreamsProject embed.FS

// kstreamsApp is the built Kafka Streams application: its jar and dependencies.
type kstreamsApp struct {
	java, classpath string
}

// needKStreams builds the Kafka Streams application once per invocation, in the work
// directory, with `mvn -q -B package` (Maven Central, or the local repository).
func (e *env) needKStreams(ctx context.Context) (*kstreamsApp, error) {
	if e.ks != nil {
		return e.ks, nil
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams rows need Java 17+ on PATH: %w", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams rows need Maven (mvn) on PATH to build integration/bench/kstreams: %w", err)
	}
	dir := filepath.Join(e.work, "kstreams-build")
	_ = os.RemoveAll(dir)
	sub, err := fs.Sub(kstreamsProject, "kstreams")
	if err != nil {
		return nil, err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return nil, fmt.Errorf("copy the Kafka Streams project: %w", err)
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "package")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("`mvn -q -B package` in %s failed (it needs Maven Central or the artifacts in ~/.m2): %w\n%s", dir, err, out)
	}
	cp, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		return nil, fmt.Errorf("the Kafka Streams build wrote no classpath: %w", err)
	}
	e.ks = &kstreamsApp{java: java, classpath: filepath.Join(dir, "target", "kstreams-bench.jar") + ":" + strings.TrimSpace(string(cp))}
	e.logf("  built the Kafka Streams application in %v", time.Since(began).Round(time.Second))
	return e.ks, nil
}

// command is the child's command line for spec.
func (k *kstreamsApp) command(spec childSpec) []string {
	return []string{
		k.java, "-cp", k.classpath, "io.github.eddystreams.bench.Main",
		strings.Join(spec.Brokers, ","), spec.Group, spec.Input, spec.Output,
		strconv.FormatInt(spec.CommitInterval.Milliseconds(), 10), spec.StateDir, spec.Topology,
		strconv.Itoa(max(spec.Threads, 1)), ksCacheArg(spec.KSCache), ksStatusArg(spec.Status),
	}
}

// ksStatusArg tells the Kafka Streams child whether to print status lines (scale rows).
func ksStatusArg(on bool) string {
	if on {
		return "status"
	}
	return "nostatus"
}

// ksCacheArg tells the Kafka Streams child whether to leave its record cache at its
// default ("default": statestore.cache.max.bytes unset, 10 MB per instance) or to turn
// it off ("off": 0, every update forwarded as eddy's uncached rows do).
func ksCacheArg(on bool) string {
	if on {
		return "default"
	}
	return "off"
}

// kstreamsDefaultsRows compare eddy's DSL word count with Kafka Streams' as users run
// them (group kstreams-defaults, issue 25 item 1): both with their record caches on at
// their default sizes (eddy: 10 MiB per task; Kafka Streams: statestore.cache.max.bytes
// 10 MB per instance, shared by its tasks), exactly-once, 100 ms commits (Kafka
// Streams' default commit.interval.ms under exactly_once_v2), one stream thread (its
// default), at 8 and 64 partitions, on words drawn from -vocab (10,000) and from
// 1,000,000 distinct words. wc-dsl-eos-100ms (the 8-partition, -vocab pair's eddy row)
// is in the dsl group and in this one. The processor-API word count with its store cached
// (wc-cached-eos-100ms[-p64], issue 25 item 5) has the same Kafka Streams twins: a Kafka
// Streams user's word count is the DSL's, cached by default (its processor-API store
// builders cache only when asked to).
func kstreamsDefaultsRows() []*rowDef {
	const ms100 = 100 * time.Millisecond
	const group, million = "kstreams-defaults", 1_000_000
	ks := "Kafka Streams 4.1.1's word count as users run it: WordCountDemo's topology with its defaults, record cache on (statestore.cache.max.bytes unset: 10 MB per instance), exactly_once_v2, commit.interval.ms 100 (its default under exactly-once), one stream thread (its default), JVM defaults"
	return []*rowDef{
		{name: "ks-wc-dsl-eos-100ms", group: group, unit: "words", ksDefaults: true, desc: ks, run: eddyRow("wordcount", true, ms100)},
		{name: "wc-dsl-eos-100ms-p64", group: group, unit: "words", twin: "ks-wc-dsl-eos-100ms-p64", desc: "eddy's DSL word count with its defaults (record caching on, 10 MiB per task), exactly-once, commit 100 ms, on input of 64 partitions (128 tasks)", run: eddyRow("wordcount-dsl", true, ms100)},
		{name: "ks-wc-dsl-eos-100ms-p64", group: group, unit: "words", ksDefaults: true, desc: "the same in Kafka Streams with its defaults (cache on) on input of 64 partitions", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-cached-eos-100ms", group: group, unit: "words", twin: "ks-wc-dsl-eos-100ms", desc: "eddy's processor-API word count (examples/wordcount) as its example runs it: its store cached (StoreNode.WithCaching, 10 MiB per task), exactly-once, commit 100 ms, 8 partitions", run: eddyRow("wordcount-cached", true, ms100)},
		{name: "wc-cached-eos-100ms-p64", group: group, unit: "words", twin: "ks-wc-dsl-eos-100ms-p64", desc: "the same on input of 64 partitions (128 tasks)", run: eddyRow("wordcount-cached", true, ms100)},
		{name: "wc-dsl-eos-100ms-k1m", group: group, unit: "words", vocab: million, twin: "ks-wc-dsl-eos-100ms-k1m", desc: "eddy's DSL word count with its defaults (cache on), exactly-once, commit 100 ms, 8 partitions, words drawn from 1,000,000 distinct words (-words draws: about 63% of them occur once -words is 1M)", run: eddyRow("wordcount-dsl", true, ms100)},
		{name: "ks-wc-dsl-eos-100ms-k1m", group: group, unit: "words", vocab: million, ksDefaults: true, desc: "the same in Kafka Streams with its defaults (cache on), 1,000,000 distinct words", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-dsl-eos-100ms-k1m-p64", group: group, unit: "words", vocab: million, twin: "ks-wc-dsl-eos-100ms-k1m-p64", desc: "eddy's DSL word count with its defaults (cache on), 64 partitions, 1,000,000 distinct words", run: eddyRow("wordcount-dsl", true, ms100)},
		{name: "ks-wc-dsl-eos-100ms-k1m-p64", group: group, unit: "words", vocab: million, ksDefaults: true, desc: "the same in Kafka Streams with its defaults (cache on), 64 partitions, 1,000,000 distinct words", run: eddyRow("wordcount", true, ms100)},
	}
}
