package txproducer_test

import (
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/txproducer"
)

// An error returned by an application's Run may wrap a producer's *Error: errors.As
// finds it with its operation and class, and errors.Is(err, ErrFenced) holds for the
// class Fenced only.
func ExampleError() {
	run := fmt.Errorf("task 0_1: %w", &txproducer.Error{Op: "commit", Class: txproducer.Fatal, Err: errors.New("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")})
	var pe *txproducer.Error
	if errors.As(run, &pe) {
		fmt.Println(pe.Op, pe.Class)
	}
	fmt.Println(errors.Is(run, txproducer.ErrFenced))
	fenced := &txproducer.Error{Op: "commit", Class: txproducer.Fenced, Err: errors.New("PRODUCER_FENCED")}
	fmt.Println(errors.Is(fenced, txproducer.ErrFenced))
	fmt.Println(run)
	// Output:
	// commit fatal
	// false
	// true
	// task 0_1: producer: commit (fatal): TRANSACTIONAL_ID_AUTHORIZATION_FAILED
}
