//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// rig is what every scenario shares: the cluster, the run's input topic (its name
// starts with the application ID, so deleteTopics takes it with the internal
// topics), the key space, the input flow, the children started and their state dirs.
// close undoes all of it.
type rig struct {
	ctx     context.Context
	c       *kafkatest.Cluster
	brokers []string
	app     string
	input   string
	keys    int
	value   []byte

	// all is every child ever started (a restarted instance is a new process), for
	// the ticks and restores of all of them.
	all      []*proc
	dirs     []string
	stopFlow context.CancelFunc
	flowing  sync.WaitGroup
}

// newRig dials the cluster and creates the input topic of a new application whose ID
// starts with name.
func newRig(ctx context.Context, brokers []string, name string, keys int, partitions int32, valueBytes int) (*rig, error) {
	c, err := kafkatest.Dial(ctx, "kafka", brokers)
	if err != nil {
		return nil, err
	}
	r := &rig{ctx: ctx, c: c, brokers: brokers, keys: keys, value: make([]byte, valueBytes)}
	r.app = c.Unique(name)
	r.input = r.app + "-input"
	if err := c.CreateTopic(ctx, r.input, partitions, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// close stops the flow, kills every child still running, removes the state dirs and
// deletes the run's topics.
func (r *rig) close() {
	if r.stopFlow != nil {
		r.stopFlow()
		r.flowing.Wait()
	}
	for _, p := range r.all {
		p.kill()
	}
	for _, d := range r.dirs {
		_ = os.RemoveAll(d)
	}
	deleteTopics(r.brokers, r.app)
}

// races is the race detector's reports in the stderr of every child started.
func (r *rig) races() int {
	n := 0
	for _, p := range r.all {
		n += p.races.count()
	}
	return n
}

// produce writes n records of the key space: keys 0..n-1 in order, or n random keys.
func (r *rig) produce(n int, random bool) error {
	const chunk = 20_000
	for done := 0; done < n; done += chunk {
		msgs := make([]*sarama.ProducerMessage, 0, chunk)
		for i := done; i < min(n, done+chunk); i++ {
			k := i
			if random {
				k = rand.IntN(r.keys)
			}
			msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder("key-" + strconv.Itoa(k)), Value: sarama.ByteEncoder(r.value)})
		}
		if err := r.c.Produce(r.ctx, r.input, msgs...); err != nil {
			return err
		}
	}
	return nil
}

// startFlow starts the input flow: 2,000 updates of random keys a second (200 every
// 100 ms), until close.
func (r *rig) startFlow() {
	flowCtx, stop := context.WithCancel(r.ctx)
	r.stopFlow = stop
	r.flowing.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for flowCtx.Err() == nil {
			select {
			case <-tick.C:
			case <-flowCtx.Done():
				return
			}
			if err := r.produce(200, true); err != nil && flowCtx.Err() == nil {
				log.Printf("producing updates: %v", err)
			}
		}
	})
}

// stateDir makes a state dir for an instance, removed by close.
func (r *rig) stateDir() (string, error) {
	dir, err := os.MkdirTemp("", "eddy-failover-")
	if err != nil {
		return "", err
	}
	r.dirs = append(r.dirs, dir)
	return dir, nil
}

// start starts a child running s, killed by close.
func (r *rig) start(s spec) (*proc, error) {
	p, err := startChild(s)
	if err != nil {
		return nil, err
	}
	r.all = append(r.all, p)
	return p, nil
}

// settle waits, up to limit, until the group has committed every input record and
// ready says the children are where the scenario wants them.
func (r *rig) settle(limit time.Duration, ready func() bool) error {
	began := time.Now()
	for {
		if time.Since(began) > limit {
			return fmt.Errorf("the instances did not settle within %v", limit)
		}
		time.Sleep(time.Second)
		lag, err := groupLag(r.ctx, r.c, r.app, r.input)
		if errors.Is(err, sarama.ErrGroupIDNotFound) {
			continue // the embedded broker's answer before the group's first commit
		}
		if err != nil {
			return err
		}
		if lag == 0 && ready() {
			return nil
		}
	}
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
