package topology

import (
	"errors"
	"reflect"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/sink"
)

// AddSinkTo adds a node that writes the records of its parents into target, a store
// outside Kafka, in one transaction per task and commit, joined to eddy's commit
// (package sink). The node's name is part of its transactions' IDs, so it holds only
// letters, digits, '.', '_' and '-'.
func AddSinkTo[K, V any](b *Builder, name string, target sink.Target[K, V], parents ...string) {
	if err := sinktxn.CheckName("sink node name", name); err != nil {
		b.fail("%v", err)
		return
	}
	if target == nil {
		b.fail("sink node %q has a nil target", name)
		return
	}
	g := target.Guarantee()
	if g != sink.TwoPhase && g != sink.Idempotent {
		b.fail("sink node %q: its target's Guarantee is %v, not sink.TwoPhase or sink.Idempotent", name, g)
		return
	}
	b.add(&graph.Node{
		Name: name, Kind: graph.Processor, Parents: parents,
		InKey: reflect.TypeFor[K](), InValue: reflect.TypeFor[V](),
		OutKey: reflect.TypeFor[K](), OutValue: reflect.TypeFor[V](),
		Factory: graph.ProcessorFactory(func() processor.Processor[K, V, K, V] {
			return &sinkWriter[K, V]{node: name, target: target}
		}),
		Sink: &sinktxn.Node{Name: name, Resolver: target, Guarantee: g},
	})
}

// sinkWriter is a sink node's processor: it writes each record into the task's
// transaction of the unit of work under way, opened at the first record.
type sinkWriter[K, V any] struct {
	node   string
	target sink.Target[K, V]
	ctx    processor.Context[K, V]
	reg    *sinktxn.Registry
}

func (w *sinkWriter[K, V]) Init(ctx processor.Context[K, V]) error {
	w.ctx = ctx
	w.reg = sinktxn.FromContext(ctx.Context())
	if w.reg == nil {
		return errNoSinkRegistry
	}
	return nil
}

func (w *sinkWriter[K, V]) Process(rec processor.Record[K, V]) error {
	ctx := w.ctx.Context()
	open, err := w.reg.Open(w.node, func(id sinktxn.ID) (sinktxn.Open, error) {
		return w.target.Begin(ctx, id)
	})
	if err != nil {
		return err
	}
	out := sink.Record[K, V]{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Offset: -1}
	if md, ok := w.ctx.RecordMetadata(); ok {
		out.Topic, out.Partition, out.Offset = md.Topic, md.Partition, md.Offset
	}
	return open.(sink.Txn[K, V]).Write(ctx, out)
}

func (w *sinkWriter[K, V]) Close() error { return nil }

// errNoSinkRegistry: the node runs outside eddy's engine, which gives every task a
// registry of its sink transactions.
var errNoSinkRegistry = errors.New("a sink node runs only in eddy's runtime or topologytest: its task has no sink registry")
