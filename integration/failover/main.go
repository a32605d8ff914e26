//go:build linux

// Command failover measures what a standby replica saves when an instance is killed
// (issue 24, item 5's short form): two instances of a key-value application (every
// input record is put in the logged store "kv") share a store of -keys keys over
// -partitions partitions, with input flowing; the first is SIGKILLed, and the second
// reports, for each task it takes over, the changelog records it restored and the time
// from the kill until the task processed a record again. It runs once per standby
// count in -standbys and prints one line each.
//
//	go run ./integration/failover -brokers 127.0.0.1:19092 -keys 1000000 -standbys 0,1
//
// The instances are child processes of this command (the same binary with -child), so
// the kill is a real SIGKILL: no commit, no LeaveGroup; the survivor takes the tasks
// once the group's session timeout (eddy's 10 s) has passed, and restores them once the
// killed instance's open transaction has been aborted (TransactionTimeout 10 s plus the
// broker's check).
//
// -scenario rolling measures a rolling restart with and without static membership and
// the pause of the tasks that do not move when an instance joins (rolling.go):
//
//	go run ./integration/failover -scenario rolling -keys 100000 -partitions 8 -static false,true
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

const storeName = "kv"

// spec is what a child runs.
type spec struct {
	Brokers  []string
	App      string
	Input    string
	StateDir string
	Standbys int
	// InstanceID is Config.InstanceID (static membership; empty: dynamic).
	InstanceID string
}

// event is one line a child prints on stdout.
type event struct {
	Kind     string   `json:"kind"` // status, restored, first, tick
	Task     string   `json:"task,omitempty"`
	Records  int64    `json:"records,omitempty"`
	Millis   int64    `json:"ms,omitempty"`
	At       int64    `json:"at,omitempty"` // unix nanoseconds
	Active   []string `json:"active,omitempty"`
	Standby  int      `json:"standby,omitempty"`
	StandbyN int      `json:"standby_running,omitempty"`
	Lag      int64    `json:"standby_lag,omitempty"`
	Gen      int32    `json:"generation,omitempty"`
}

func main() {
	log.SetFlags(0)
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		if err := child(os.Args[2]); err != nil {
			log.Fatal(err)
		}
		return
	}
	brokers := flag.String("brokers", "127.0.0.1:19092", "Kafka bootstrap addresses, comma-separated")
	keys := flag.Int("keys", 1_000_000, "distinct keys in the store")
	partitions := flag.Int("partitions", 4, "input partitions (tasks)")
	valueBytes := flag.Int("value-bytes", 100, "bytes per value")
	standbys := flag.String("standbys", "0,1", "standby counts to run, comma-separated")
	scenario := flag.String("scenario", "failover", "failover (SIGKILL one of two instances) or rolling (a rolling restart of -instances instances, then one more instance joins)")
	instances := flag.Int("instances", 3, "-scenario rolling: instances")
	static := flag.String("static", "false,true", "-scenario rolling: static membership (Config.InstanceID) settings to run, comma-separated")
	flag.Parse()
	if *scenario == "rolling" {
		for _, s := range strings.Split(*static, ",") {
			st, err := strconv.ParseBool(s)
			if err != nil {
				log.Fatalf("-static: %v", err)
			}
			r, err := runRolling(strings.Split(*brokers, ","), *keys, int32(*partitions), *valueBytes, *instances, st)
			if err != nil {
				log.Fatalf("static=%v: %v", st, err)
			}
			fmt.Println(r)
		}
		return
	} else if *scenario != "failover" {
		log.Fatalf("-scenario %q: want failover or rolling", *scenario)
	}
	for _, s := range strings.Split(*standbys, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			log.Fatalf("-standbys: %v", err)
		}
		r, err := run(strings.Split(*brokers, ","), *keys, int32(*partitions), *valueBytes, n)
		if err != nil {
			log.Fatalf("standbys=%d: %v", n, err)
		}
		fmt.Println(r)
	}
}

// result is one run's measurement.
type result struct {
	standbys  int
	keys      int
	moved     []string
	restored  int64
	restoreMs int64
	resume    map[string]time.Duration
}

func (r result) String() string {
	var worst time.Duration
	var per []string
	for _, t := range r.moved {
		worst = max(worst, r.resume[t])
		per = append(per, fmt.Sprintf("%s:%v", t, r.resume[t].Round(10*time.Millisecond)))
	}
	return fmt.Sprintf("standbys=%d keys=%d moved=%v restored_records=%d restore_ms(sum)=%d resume_after_kill(max)=%v per_task=%v",
		r.standbys, r.keys, r.moved, r.restored, r.restoreMs, worst.Round(10*time.Millisecond), per)
}

func run(brokers []string, keys int, partitions int32, valueBytes, standbys int) (result, error) {
	res := result{standbys: standbys, keys: keys, resume: map[string]time.Duration{}}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	c, err := kafkatest.Dial(ctx, "kafka", brokers)
	if err != nil {
		return res, err
	}
	app := c.Unique(fmt.Sprintf("failover-%d", standbys))
	input := app + "-input"
	defer deleteTopics(brokers, app)
	if err := c.CreateTopic(ctx, input, partitions, nil); err != nil {
		return res, err
	}
	value := make([]byte, valueBytes)
	produce := func(n int, random bool) error {
		const chunk = 20_000
		for done := 0; done < n; done += chunk {
			msgs := make([]*sarama.ProducerMessage, 0, chunk)
			for i := done; i < min(n, done+chunk); i++ {
				k := i
				if random {
					k = rand.IntN(keys)
				}
				msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder("key-" + strconv.Itoa(k)), Value: sarama.ByteEncoder(value)})
			}
			if err := c.Produce(ctx, input, msgs...); err != nil {
				return err
			}
		}
		return nil
	}
	began := time.Now()
	if err := produce(keys, false); err != nil {
		return res, err
	}
	log.Printf("standbys=%d: %d keys written in %v", standbys, keys, time.Since(began).Round(time.Millisecond))

	children := make([]*proc, 2)
	for i := range children {
		dir, err := os.MkdirTemp("", "eddy-failover-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		if children[i], err = startChild(spec{Brokers: brokers, App: app, Input: input, StateDir: dir, Standbys: standbys}); err != nil {
			return res, err
		}
		defer children[i].kill()
	}
	// Both instances run their tasks, every record is processed, and the survivor's
	// standbys (if any) have caught up.
	var victim []string
	waitStart := time.Now()
	for {
		if time.Since(waitStart) > 10*time.Minute {
			return res, fmt.Errorf("the instances did not settle within 10 minutes")
		}
		time.Sleep(time.Second)
		lag, err := groupLag(ctx, c, app, input)
		if err != nil {
			return res, err
		}
		s0, s1 := children[0].status(), children[1].status()
		victim = s0.Active
		if lag == 0 && len(s0.Active) > 0 && len(s1.Active) > 0 && s1.StandbyN == s1.Standby && s1.Standby == standbys*len(s0.Active) && s1.Lag < 1000 {
			break
		}
	}
	log.Printf("standbys=%d: settled in %v; the first instance runs %v", standbys, time.Since(waitStart).Round(time.Millisecond), victim)

	// Input flows: 2,000 updates of random keys a second, from before the kill until
	// the survivor runs every task.
	flowCtx, stopFlow := context.WithCancel(ctx)
	var flowing sync.WaitGroup
	flowing.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for flowCtx.Err() == nil {
			select {
			case <-tick.C:
			case <-flowCtx.Done():
				return
			}
			if err := produce(200, true); err != nil && flowCtx.Err() == nil {
				log.Printf("producing updates: %v", err)
			}
		}
	})
	defer func() { stopFlow(); flowing.Wait() }()
	time.Sleep(3 * time.Second)
	killed := time.Now()
	children[0].kill()
	log.Printf("standbys=%d: SIGKILLed the first instance", standbys)
	for {
		if time.Since(killed) > 5*time.Minute {
			return res, fmt.Errorf("the survivor did not resume %v within 5 minutes", victim)
		}
		time.Sleep(200 * time.Millisecond)
		first := children[1].firsts()
		done := 0
		for _, t := range victim {
			if at, ok := first[t]; ok && at.After(killed) {
				done++
				res.resume[t] = at.Sub(killed)
			}
		}
		if done == len(victim) {
			break
		}
	}
	res.moved = victim
	for _, t := range victim {
		r := children[1].restoredOf(t)
		res.restored += r.Records
		res.restoreMs += r.Millis
	}
	children[1].term()
	return res, nil
}

// deleteTopics deletes the run's topics (the input and the application's internal
// topics: every name starting with app), best effort.
func deleteTopics(brokers []string, app string) {
	admin, err := sarama.NewClusterAdmin(brokers, kafkatest.NewSaramaConfig())
	if err != nil {
		log.Printf("deleting the run's topics: %v", err)
		return
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		log.Printf("deleting the run's topics: %v", err)
		return
	}
	for name := range topics {
		if strings.HasPrefix(name, app) {
			if err := admin.DeleteTopic(name); err != nil {
				log.Printf("deleting topic %s: %v", name, err)
			}
		}
	}
}

// groupLag is the input records the group has not committed yet.
func groupLag(ctx context.Context, c *kafkatest.Cluster, app, input string) (int64, error) {
	ends, err := c.EndOffsets(ctx, input, sarama.ReadUncommitted)
	if err != nil {
		return 0, err
	}
	committed, err := c.CommittedOffsets(ctx, app, input)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, end := range ends {
		// A committed offset stops before the commit marker of a transactional
		// topic; this input topic is not transactional.
		lag += end - max(committed[p], 0)
	}
	return lag, nil
}

// proc is a child process and what it reported.
type proc struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	last     event
	first    map[string]time.Time
	restored map[string]event
	// ticks are, per task, the times it processed records here (at most one
	// every tickEvery), and restores every restore report with its time.
	ticks    map[string][]time.Time
	restores []timedRestore
	done     chan struct{}
}

type timedRestore struct {
	at time.Time
	e  event
}

func startChild(s spec) (*proc, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-child", string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, first: map[string]time.Time{}, restored: map[string]event{}, ticks: map[string][]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			p.mu.Lock()
			switch e.Kind {
			case "status":
				p.last = e
			case "first":
				p.first[e.Task] = time.Unix(0, e.At)
				p.ticks[e.Task] = append(p.ticks[e.Task], time.Unix(0, e.At))
			case "tick":
				p.ticks[e.Task] = append(p.ticks[e.Task], time.Unix(0, e.At))
			case "restored":
				p.restores = append(p.restores, timedRestore{at: time.Now(), e: e})
				r := p.restored[e.Task]
				r.Records += e.Records
				r.Millis += e.Millis
				p.restored[e.Task] = r
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

func (p *proc) status() event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *proc) firsts() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range p.first {
		out[k] = v
	}
	return out
}

func (p *proc) restoredOf(task string) event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restored[task]
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	_ = p.cmd.Wait()
}

func (p *proc) term() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		_ = p.cmd.Wait()
	case <-time.After(time.Minute):
		p.kill()
	}
}

// child runs one instance and reports on stdout.
func child(arg string) error {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		return err
	}
	var outMu sync.Mutex
	emit := func(e event) {
		b, _ := json.Marshal(e)
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.Write(append(b, '\n'))
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.Bytes(), s.Input)
	topology.AddProcessor(b, "put", func() processor.Processor[string, []byte, string, []byte] {
		return &putter{first: func(task string) {
			emit(event{Kind: "first", Task: task, At: time.Now().UnixNano()})
		}, tick: func(task string, at time.Time) {
			emit(event{Kind: "tick", Task: task, At: at.UnixNano()})
		}}
	}, "in")
	topology.AddKeyValueStore(b, storeName, serde.String(), serde.Bytes(), "put")
	topo, err := b.Build()
	if err != nil {
		return err
	}
	app, err := eddy.New(topo, eddy.Config{
		ApplicationID: s.App, Brokers: s.Brokers, StateDir: s.StateDir, NumStandbyReplicas: s.Standbys, InstanceID: s.InstanceID,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnRestore: func(task processor.TaskID, r changelog.Result) {
			if r.Store == storeName {
				emit(event{Kind: "restored", Task: task.String(), Records: r.Records, Millis: r.Duration.Milliseconds()})
			}
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			v := app.TasksView()
			e := event{Kind: "status", Gen: v.Generation}
			for _, t := range v.Tasks {
				switch t.Role {
				case "active":
					if t.State == "running" {
						e.Active = append(e.Active, t.Task)
					}
				case "standby":
					e.Standby++
					if t.State == "running" {
						e.StandbyN++
					}
					for _, st := range t.Stores {
						if st.Lag != nil {
							e.Lag += *st.Lag
						}
					}
				}
			}
			sort.Strings(e.Active)
			emit(e)
		}
	}()
	return app.Run(ctx)
}

// tickEvery is how often a task reports that it processes records: the resolution
// of the pauses -scenario rolling measures (a pause is measured up to tickEvery
// long), at 20 lines a second per task.
const tickEvery = 50 * time.Millisecond

// putter puts every record in the store and reports the first record of each task's
// life on this instance (a task opened here anew makes new processors), then a tick
// at the first record processed tickEvery after the last report.
type putter struct {
	ctx      processor.Context[string, []byte]
	kv       statestore.KeyValueStore[string, []byte]
	first    func(task string)
	tick     func(task string, at time.Time)
	task     string
	seen     bool
	lastTick time.Time
}

func (p *putter) Init(ctx processor.Context[string, []byte]) error {
	p.ctx, p.task = ctx, ctx.TaskID().String()
	var err error
	p.kv, err = processor.KeyValueStore[string, []byte](ctx, storeName)
	return err
}

func (p *putter) Process(rec processor.Record[string, []byte]) error {
	if !p.seen {
		p.seen = true
		p.lastTick = time.Now()
		p.first(p.task)
	} else if now := time.Now(); now.Sub(p.lastTick) >= tickEvery {
		p.lastTick = now
		p.tick(p.task, now)
	}
	return p.kv.Put(rec.Key, rec.Value)
}

func (p *putter) Close() error { return nil }
