package serde_test

import (
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde"
)

// Benchmarks of the built-in serdes on the sizes the runtime benchmark uses (100-byte
// values). Every source deserializes each record's key and value and every sink
// serializes them, so these costs are paid twice per record and node boundary.
//
//	go test -run '^$' -bench . -benchmem -count 10 ./serde/ | tee new.txt
//	benchstat old.txt new.txt

const benchTopic = "bench-topic"

type benchEvent struct {
	ID     int64   `json:"id"`
	User   string  `json:"user"`
	Action string  `json:"action"`
	Amount float64 `json:"amount"`
}

func benchSerde[T any](b *testing.B, s serde.Serde[T], v T) {
	data, err := s.Serialize(benchTopic, v)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("serialize", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := s.Serialize(benchTopic, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deserialize", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := s.Deserialize(benchTopic, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSerde(b *testing.B) {
	value := strings.Repeat("abcdefghij", 10) // 100 bytes
	b.Run("String/100B", func(b *testing.B) { benchSerde(b, serde.String(), value) })
	b.Run("String/8B", func(b *testing.B) { benchSerde(b, serde.String(), "word1234") })
	b.Run("Bytes/100B", func(b *testing.B) { benchSerde(b, serde.Bytes(), []byte(value)) })
	b.Run("Int64", func(b *testing.B) { benchSerde(b, serde.Int64(), int64(1234567)) })
	b.Run("Int32", func(b *testing.B) { benchSerde(b, serde.Int32(), int32(1234567)) })
	b.Run("Float64", func(b *testing.B) { benchSerde(b, serde.Float64(), 3.25) })
	b.Run("Nullable-String/100B", func(b *testing.B) { benchSerde(b, serde.Nullable(serde.String()), &value) })
	b.Run("JSON-struct", func(b *testing.B) {
		benchSerde(b, serde.JSON[benchEvent](), benchEvent{ID: 42, User: "user-0042", Action: "purchase", Amount: 19.99})
	})
}
