package processor

// Map returns a supplier of a processor that forwards fn(rec) for every record.
func Map[KIn, VIn, KOut, VOut any](fn func(Record[KIn, VIn]) (Record[KOut, VOut], error)) Supplier[KIn, VIn, KOut, VOut] {
	return func() Processor[KIn, VIn, KOut, VOut] {
		return &funcProcessor[KIn, VIn, KOut, VOut]{fn: func(ctx Context[KOut, VOut], r Record[KIn, VIn]) error {
			out, err := fn(r)
			if err != nil {
				return err
			}
			return ctx.Forward(out)
		}}
	}
}

// MapValues returns a supplier of a processor that replaces each value by fn(value) and
// keeps key, timestamp and headers.
func MapValues[K, VIn, VOut any](fn func(VIn) (VOut, error)) Supplier[K, VIn, K, VOut] {
	return func() Processor[K, VIn, K, VOut] {
		return &funcProcessor[K, VIn, K, VOut]{fn: func(ctx Context[K, VOut], r Record[K, VIn]) error {
			v, err := fn(r.Value)
			if err != nil {
				return err
			}
			return ctx.Forward(WithValue(r, v))
		}}
	}
}

// Filter returns a supplier of a processor that forwards the records for which keep
// returns true.
func Filter[K, V any](keep func(Record[K, V]) bool) Supplier[K, V, K, V] {
	return func() Processor[K, V, K, V] {
		return &funcProcessor[K, V, K, V]{fn: func(ctx Context[K, V], r Record[K, V]) error {
			if !keep(r) {
				return nil
			}
			return ctx.Forward(r)
		}}
	}
}

// FlatMap returns a supplier of a processor that forwards every record fn returns, in
// order.
func FlatMap[KIn, VIn, KOut, VOut any](fn func(Record[KIn, VIn]) ([]Record[KOut, VOut], error)) Supplier[KIn, VIn, KOut, VOut] {
	return func() Processor[KIn, VIn, KOut, VOut] {
		return &funcProcessor[KIn, VIn, KOut, VOut]{fn: func(ctx Context[KOut, VOut], r Record[KIn, VIn]) error {
			outs, err := fn(r)
			if err != nil {
				return err
			}
			for _, out := range outs {
				if err := ctx.Forward(out); err != nil {
					return err
				}
			}
			return nil
		}}
	}
}

// ForEach returns a supplier of a terminal processor that calls fn for every record and
// forwards nothing.
func ForEach[K, V any](fn func(Record[K, V]) error) Supplier[K, V, K, V] {
	return func() Processor[K, V, K, V] {
		return &funcProcessor[K, V, K, V]{fn: func(_ Context[K, V], r Record[K, V]) error { return fn(r) }}
	}
}

type funcProcessor[KIn, VIn, KOut, VOut any] struct {
	ctx Context[KOut, VOut]
	fn  func(Context[KOut, VOut], Record[KIn, VIn]) error
}

func (p *funcProcessor[KIn, VIn, KOut, VOut]) Init(ctx Context[KOut, VOut]) error {
	p.ctx = ctx
	return nil
}

func (p *funcProcessor[KIn, VIn, KOut, VOut]) Process(r Record[KIn, VIn]) error {
	return p.fn(p.ctx, r)
}
func (p *funcProcessor[KIn, VIn, KOut, VOut]) Close() error { return nil }
