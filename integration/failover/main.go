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
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

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
	r, err := newRig(ctx, brokers, fmt.Sprintf("failover-%d", standbys), keys, partitions, valueBytes)
	if err != nil {
		return res, err
	}
	defer r.close()
	began := time.Now()
	if err := r.produce(keys, false); err != nil {
		return res, err
	}
	log.Printf("standbys=%d: %d keys written in %v", standbys, keys, time.Since(began).Round(time.Millisecond))

	children := make([]*proc, 2)
	for i := range children {
		dir, err := r.stateDir()
		if err != nil {
			return res, err
		}
		if children[i], err = r.start(spec{Brokers: brokers, App: r.app, Input: r.input, StateDir: dir, Standbys: standbys}); err != nil {
			return res, err
		}
	}
	// Both instances run their tasks, every record is processed, and the survivor's
	// standbys (if any) have caught up.
	var victim []string
	waitStart := time.Now()
	err = r.settle(10*time.Minute, func() bool {
		s0, s1 := children[0].status(), children[1].status()
		victim = s0.Active
		return len(s0.Active) > 0 && len(s1.Active) > 0 && s1.StandbyN == s1.Standby && s1.Standby == standbys*len(s0.Active) && s1.Lag < 1000
	})
	if err != nil {
		return res, err
	}
	log.Printf("standbys=%d: settled in %v; the first instance runs %v", standbys, time.Since(waitStart).Round(time.Millisecond), victim)

	// Input flows from before the kill until the survivor runs every task.
	r.startFlow()
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
