package eddy_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
)

// The group's fetches ask each partition for its share of eddy's fetch budget (4 MiB
// over every source partition of the application: the word count on 8 partitions reads
// 8 of input and 8 of its repartition topic, 256 KiB each); a size set through
// Config.Sarama is left as it is.
func TestFetchSizeIsTheBudgetShare(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook func(*sarama.Config)
		want int32
	}{
		{name: "eddy's", want: 256 << 10},
		{name: "the user's", hook: func(sc *sarama.Config) { sc.Consumer.Fetch.Default = 100 << 10 }, want: 100 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := kafkatest.Start(t)
			c := kafkatest.Connect(t, "embedded", b.Addrs())
			e := newWordCount(t, c, 8)
			cfg := e.config(t)
			cfg.Sarama = tc.hook
			repartition := changelog.RepartitionTopicName(e.appID, "words")
			var mu sync.Mutex
			sizes := map[string][]int32{} // source topic → the distinct sizes asked
			k := b.Kfake()
			k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				k.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				for _, tp := range req.(*kmsg.FetchRequest).Topics {
					if tp.Topic != e.input && tp.Topic != repartition {
						continue
					}
					for _, p := range tp.Partitions {
						if !slices.Contains(sizes[tp.Topic], p.PartitionMaxBytes) {
							sizes[tp.Topic] = append(sizes[tp.Topic], p.PartitionMaxBytes)
						}
					}
				}
				return nil, nil, false // the broker answers it as usual
			})
			in := start(t, e.topo, cfg)
			e.produce(t, 200)
			e.waitCountsWhileRunning(t, in, time.Minute, "the counts")
			if err := in.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, topic := range []string{e.input, repartition} {
				if got := sizes[topic]; !slices.Equal(got, []int32{tc.want}) {
					t.Errorf("%s: fetches asked for %v bytes per partition, want %d", topic, got, tc.want)
				}
			}
		})
	}
}
