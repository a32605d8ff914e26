package kafkatest

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

func TestUnique(t *testing.T) {
	c := &Cluster{name: "x", scope: t.Name()}
	valid := regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
	seen := map[string]bool{}
	for range 1000 {
		n := c.Unique("word count/ü")
		if !valid.MatchString(n) || !strings.HasPrefix(n, "word-count--") {
			t.Fatalf("Unique = %q: want a valid topic name starting with the cleaned prefix", n)
		}
		if seen[n] {
			t.Fatalf("Unique returned %q twice", n)
		}
		seen[n] = true
	}
	other := &Cluster{name: "x", scope: "OtherTest"}
	a, b := strings.Split(c.Unique("p"), "-"), strings.Split(other.Unique("p"), "-")
	if a[1] == b[1] {
		t.Errorf("two tests get the same name hash %q", a[1])
	}
	if n := c.Unique(strings.Repeat("x", 300)); len(n) > 249 {
		t.Errorf("Unique of a long prefix is %d characters, Kafka allows 249", len(n))
	}
}

func TestBrokersFromEnv(t *testing.T) {
	for env, want := range map[string][]string{
		"":                            nil,
		" , ":                         nil,
		"127.0.0.1:19092":             {"127.0.0.1:19092"},
		" a:1 , b:2,":                 {"a:1", "b:2"},
		"host-1:9092,host-2:9092,h:1": {"host-1:9092", "host-2:9092", "h:1"},
	} {
		t.Setenv(BrokersEnv, env)
		if got := BrokersFromEnv(); !slices.Equal(got, want) {
			t.Errorf("%s=%q: BrokersFromEnv() = %q, want %q", BrokersEnv, env, got, want)
		}
	}
}

func TestNewBrokerOptions(t *testing.T) {
	if _, err := NewBroker(NumBrokers(0)); err == nil {
		t.Errorf("NewBroker(NumBrokers(0)) succeeded")
	}
	if _, err := NewBroker(SeedTopics(0, "t")); err == nil {
		t.Errorf("NewBroker(SeedTopics(0, ...)) succeeded")
	}
	b := Start(t, NumBrokers(3), SeedTopics(4, "seeded"))
	if n := len(b.Addrs()); n != 3 {
		t.Fatalf("NumBrokers(3): %d addresses", n)
	}
	for _, a := range b.Addrs() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("address %q is not on 127.0.0.1", a)
		}
	}
	end, err := b.Cluster().EndOffsets(t.Context(), "seeded", sarama.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	if len(end) != 4 {
		t.Errorf("seeded topic has %d partitions, want 4", len(end))
	}
	b.Close()
	b.Close() // idempotent
}
