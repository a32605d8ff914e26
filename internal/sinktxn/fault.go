package sinktxn

import "sync/atomic"

// Step is a step of the sink protocol at which a test can inject a fault (SetFaultHook).
type Step string

const (
	// StepPrepared: a task's sink transactions are prepared (Registry.Prepare
	// succeeded); the Kafka transaction that names them has not committed.
	StepPrepared Step = "prepared"
	// StepKafkaCommitted: the Kafka transaction committed (Registry.Committed); its
	// prepared sink transactions are not committed and the stores not yet flushed.
	StepKafkaCommitted Step = "kafka-committed"
	// StepCommitPrepared: the post-commit is about to commit a prepared transaction
	// whose Kafka transaction committed (Registry.Finish), the stores flushed.
	StepCommitPrepared Step = "commit-prepared"
	// StepRecover: a task's recovery found pending transactions and is about to
	// commit or roll back one (Registry.Recover).
	StepRecover Step = "recover"
)

// Steps are the steps a fault hook sees, in the protocol's order.
func Steps() []Step { return []Step{StepPrepared, StepKafkaCommitted, StepCommitPrepared, StepRecover} }

var faultHook atomic.Pointer[func(Step, ID)]

// SetFaultHook makes the registries call fn at each Step, with the transaction
// concerned, from the task's goroutine; nil removes it. Only the exactly-once harness
// (integration/eos) sets it, in its instance processes, where fn kills the process at
// a step the harness armed: a process killed there leaves the target and Kafka in the
// state the protocol must recover from. It is never set in an application: eddy's
// packages do not call it.
func SetFaultHook(fn func(Step, ID)) {
	if fn == nil {
		faultHook.Store(nil)
		return
	}
	faultHook.Store(&fn)
}

// fault calls the fault hook, if any: one atomic load otherwise.
func fault(s Step, id ID) {
	if fn := faultHook.Load(); fn != nil {
		(*fn)(s, id)
	}
}
