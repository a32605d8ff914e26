package serde_test

import (
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// Int64 writes what Kafka's LongSerializer writes, so a Java consumer reads it.
func ExampleInt64() {
	s := serde.Int64()
	one, _ := s.Serialize("counts", 1)
	minusOne, _ := s.Serialize("counts", -1)
	fmt.Printf("% x\n% x\n", one, minusOne)
	// Output:
	// 00 00 00 00 00 00 00 01
	// ff ff ff ff ff ff ff ff
}

// A tombstone (nil bytes) is refused by a serde whose type has no nil; Nullable turns it
// into a nil pointer.
func ExampleNullable() {
	_, err := serde.Int64().Deserialize("counts", nil)
	fmt.Println(errors.Is(err, serde.ErrTombstone), err)

	n, err := serde.Nullable(serde.Int64()).Deserialize("counts", nil)
	fmt.Println(n == nil, err)
	// Output:
	// true serde Int64: deserialize on topic "counts": null value (tombstone)
	// true <nil>
}

func ExampleJSON() {
	type order struct {
		ID     string  `json:"id"`
		Amount float64 `json:"amount"`
	}
	s := serde.JSON[order]()
	b, _ := s.Serialize("orders", order{ID: "o-1", Amount: 9.5})
	fmt.Println(string(b))
	o, _ := s.Deserialize("orders", b)
	fmt.Printf("%+v\n", o)
	_, err := s.Deserialize("orders", []byte("{"))
	fmt.Println(err)
	// Output:
	// {"id":"o-1","amount":9.5}
	// {ID:o-1 Amount:9.5}
	// serde JSON[serde_test.order]: deserialize on topic "orders": unexpected end of JSON input
}
