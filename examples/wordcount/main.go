// Command wordcount runs Kafka Streams' WordCountDemo on eddy, its topology written in
// the stream DSL (package dsl), or with -processor-api in the processor API (package
// wordcount); both write the same counts.
//
// With no flags it starts an embedded broker, creates the topics, feeds a built-in
// sample text, runs the application until every line is processed and committed, and
// prints the final counts read back from streams-wordcount-output with read_committed:
// one "word<TAB>count" line per word, sorted by word. Logs go to stderr.
//
//	go run ./examples/wordcount                          # embedded broker, sample text
//	go run ./examples/wordcount -input book.txt          # count a file
//	go run ./examples/wordcount -brokers localhost:9092  # a real cluster
//	echo "to be or not to be" | go run ./examples/wordcount -input - -follow
//	go run ./examples/wordcount -follow -http 127.0.0.1:8080          # then curl it, or open /ui/
//
// A secured cluster takes the TLS and SASL flags and environment variables of the eddy
// tool (-h lists them):
//
//	EDDY_SASL_PASSWORD=... go run ./examples/wordcount -brokers kafka:9093 \
//		-tls-ca-file ca.pem -sasl-mechanism SCRAM-SHA-512 -sasl-username wordcount
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/securityflags"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
)

const appID = "streams-wordcount"

type options struct {
	brokers    string
	input      string
	partitions int
	stateDir   string
	follow     bool
	verbose    bool
	timeout    time.Duration
	httpAddr   string
	procAPI    bool
	security   eddy.Security // TLS and SASL of -brokers
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", "", "comma-separated host:port of a Kafka cluster (default: start an embedded broker)")
	flag.StringVar(&o.input, "input", "", "file whose lines to count, - for stdin (default: a built-in sample text)")
	flag.IntVar(&o.partitions, "partitions", 4, "partitions of the topics this command creates")
	flag.StringVar(&o.stateDir, "state-dir", "", "state directory (default: a temporary one, removed at exit)")
	flag.BoolVar(&o.follow, "follow", false, "keep running and print each count as it changes, until interrupted")
	flag.BoolVar(&o.verbose, "v", false, "log at info level (default: warnings only)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up when the input is not processed within this time")
	flag.BoolVar(&o.procAPI, "processor-api", false, "run the processor-API version of the topology instead of the DSL one")
	flag.StringVar(&o.httpAddr, "http", "", "serve /metrics, /healthz, /readyz, /topology, /stores/counts/keys/{word} and the console /ui/ on this host:port")
	secFlags := securityflags.Register(flag.CommandLine)
	flag.Parse()
	sec, err := secFlags.Security(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(2)
	}
	o.security = sec
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	if o.partitions < 1 {
		return fmt.Errorf("-partitions %d: want at least 1", o.partitions)
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	in, err := openInput(o.input)
	if err != nil {
		return err
	}
	defer in.Close()

	var brokers []string
	var cluster *kafkatest.Cluster
	if o.brokers == "" {
		if o.security.TLS != nil || o.security.SASL != nil {
			return errors.New("the TLS and SASL settings are for a cluster given with -brokers: the embedded broker is plaintext")
		}
		b, err := kafkatest.NewBroker()
		if err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		defer b.Close()
		brokers = b.Addrs()
		logger.Info("embedded broker started", "addrs", brokers)
	} else {
		brokers = strings.Split(o.brokers, ",")
	}
	if o.stateDir == "" {
		dir, err := os.MkdirTemp("", "eddy-wordcount-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.stateDir = dir
	}
	k := kafka{brokers: brokers, security: o.security}
	cluster, err = kafkatest.DialWith(ctx, "wordcount", brokers, o.security.ApplyTo)
	if err != nil {
		return err
	}
	for _, topic := range []string{wordcount.InputTopic, wordcount.OutputTopic} {
		if err := ensureTopic(ctx, k, cluster, topic, int32(o.partitions)); err != nil {
			return err
		}
	}
	topology := dsl.Topology
	if o.procAPI {
		topology = wordcount.Topology
	}
	topo, err := topology()
	if err != nil {
		return err
	}
	cfg := eddy.Config{ApplicationID: appID, Brokers: brokers, StateDir: o.stateDir, Logger: logger, Security: o.security}
	var ln net.Listener
	if o.httpAddr != "" {
		ln, err = net.Listen("tcp", o.httpAddr)
		if err != nil {
			return fmt.Errorf("-http: %w", err)
		}
		defer ln.Close()
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Metrics = reg
		cfg.AdvertisedAddr = ln.Addr().String()
	}
	app, err := eddy.New(topo, cfg)
	if err != nil {
		return err
	}
	if ln != nil {
		// The console too: this command serves a demo on an address of your choice, and
		// the console is the easiest way to look at it (http://ADDR/ui/).
		srv := &http.Server{Handler: app.HandlerWith(eddy.HandlerOptions{Console: true}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		logger.Warn("serving metrics, health, queries and the console", "addr", "http://"+ln.Addr().String(), "console", "http://"+ln.Addr().String()+"/ui/")
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()

	if o.follow {
		return follow(ctx, k, cluster, in, stdout, appDone)
	}
	n, err := produceLines(ctx, cluster, in)
	if err != nil {
		return err
	}
	logger.Info("input written", "lines", n)
	waitCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := waitProcessed(waitCtx, cluster, kafkatest.InputTopics(topo, appID), appDone); err != nil {
		return err
	}
	stopApp()
	if err := <-appDone; err != nil {
		return err
	}
	counts, err := readCounts(ctx, cluster)
	if err != nil {
		return err
	}
	return printCounts(stdout, counts)
}

// kafka is the cluster the command's own clients (topics, input, output) connect to,
// with the application's TLS and SASL settings.
type kafka struct {
	brokers  []string
	security eddy.Security
}

func (k kafka) config() (*sarama.Config, error) {
	cfg := kafkatest.NewSaramaConfig()
	if err := k.security.ApplyTo(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (k kafka) client() (sarama.Client, error) {
	cfg, err := k.config()
	if err != nil {
		return nil, err
	}
	return sarama.NewClient(k.brokers, cfg)
}

func openInput(path string) (io.ReadCloser, error) {
	switch path {
	case "":
		return io.NopCloser(strings.NewReader(sampleText)), nil
	case "-":
		return io.NopCloser(os.Stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-input: %w", err)
	}
	return f, nil
}

// ensureTopic creates topic unless it exists.
func ensureTopic(ctx context.Context, k kafka, c *kafkatest.Cluster, topic string, partitions int32) error {
	client, err := k.client()
	if err != nil {
		return err
	}
	defer client.Close()
	if _, err := client.Partitions(topic); err == nil {
		return nil
	}
	return c.CreateTopic(ctx, topic, partitions, nil)
}

// produceLines writes every line of r (without key, like Kafka's console producer).
func produceLines(ctx context.Context, c *kafkatest.Cluster, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var batch []*sarama.ProducerMessage
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Produce(ctx, wordcount.InputTopic, batch...)
		batch = batch[:0]
		return err
	}
	for sc.Scan() {
		batch = append(batch, &sarama.ProducerMessage{Value: sarama.StringEncoder(sc.Text())})
		n++
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("read input: %w", err)
	}
	return n, flush()
}

// waitProcessed waits until the application has committed every record of the topics
// it reads (the input and the repartition topic), or has stopped.
func waitProcessed(ctx context.Context, c *kafkatest.Cluster, topics []string, appDone <-chan error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- c.WaitProcessed(ctx, appID, topics...) }()
	select {
	case err := <-waited:
		return err
	case err := <-appDone:
		cancel()
		<-waited
		if err == nil {
			err = errors.New("the application stopped")
		}
		return err
	}
}

// readCounts reads the output topic with read_committed: the last count per word.
func readCounts(ctx context.Context, c *kafkatest.Cluster) (map[string]int64, error) {
	recs, err := kafkatest.ReadCommittedTyped(ctx, c, wordcount.OutputTopic, serde.String(), serde.Int64())
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for _, r := range recs {
		counts[r.Key] = r.Value
	}
	return counts, nil
}

func printCounts(w io.Writer, counts map[string]int64) error {
	words := make([]string, 0, len(counts))
	for word := range counts {
		words = append(words, word)
	}
	sort.Strings(words)
	bw := bufio.NewWriter(w)
	for _, word := range words {
		fmt.Fprintf(bw, "%s\t%d\n", word, counts[word])
	}
	return bw.Flush()
}

// follow produces the input as it comes and prints every committed count update until
// interrupted.
func follow(ctx context.Context, k kafka, c *kafkatest.Cluster, in io.Reader, stdout io.Writer, appDone <-chan error) error {
	cfg, err := k.config()
	if err != nil {
		return err
	}
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	consumer, err := sarama.NewConsumer(k.brokers, cfg)
	if err != nil {
		return err
	}
	defer consumer.Close()
	parts, err := consumer.Partitions(wordcount.OutputTopic)
	if err != nil {
		return err
	}
	updates := make(chan *sarama.ConsumerMessage)
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(wordcount.OutputTopic, p, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				select {
				case updates <- m:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	produced := make(chan error, 1)
	go func() {
		_, err := produceLines(ctx, c, in)
		produced <- err
	}()
	for {
		select {
		case m := <-updates:
			if len(m.Value) == 8 {
				fmt.Fprintf(stdout, "%s\t%d\n", m.Key, int64(binary.BigEndian.Uint64(m.Value)))
			}
		case err := <-produced:
			if err != nil {
				return err
			}
			produced = nil
		case err := <-appDone:
			return err
		case <-ctx.Done():
			return <-appDone // Run commits and returns once its context (ctx) ends
		}
	}
}
