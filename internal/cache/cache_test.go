package cache

import (
	"strings"
	"testing"
)

// counting is a cache of n entries of one byte each; its Flush calls onFlush.
type counting struct {
	reg     *Registry
	n       int
	flushes int
	onFlush func() error
}

func (c *counting) put() error { c.n++; return c.reg.Grew(c, 1) }
func (c *counting) Flush() error {
	c.reg.Shrank(int64(c.n))
	c.n = 0
	c.flushes++
	if c.onFlush != nil {
		return c.onFlush()
	}
	return nil
}
func (c *counting) Drop()    { c.n = 0 }
func (c *counting) Len() int { return c.n }

// Over the budget only the cache written is flushed; Drop forgets everything.
func TestRegistryEvictsTheCacheWritten(t *testing.T) {
	r := NewRegistry()
	a, b := &counting{reg: r}, &counting{reg: r}
	r.Register("a", a, 3)
	r.Register("b", b, 99) // the first registration sets the budget
	for _, c := range []*counting{a, a, b} {
		if err := c.put(); err != nil {
			t.Fatal(err)
		}
	}
	if a.flushes+b.flushes != 0 || r.Bytes() != 3 {
		t.Fatalf("at the budget: flushes %d/%d, %d bytes; want none, 3", a.flushes, b.flushes, r.Bytes())
	}
	if err := b.put(); err != nil {
		t.Fatal(err)
	}
	if a.flushes != 0 || b.flushes != 1 || r.Bytes() != 2 || r.Evictions() != 1 {
		t.Fatalf("over the budget: flushes %d/%d, %d bytes, %d evictions; want b flushed, 2 bytes left", a.flushes, b.flushes, r.Bytes(), r.Evictions())
	}
	r.Drop()
	if a.Len() != 0 || r.Bytes() != 0 {
		t.Fatalf("after Drop: a holds %d, %d bytes", a.Len(), r.Bytes())
	}
}

// A cache whose flush refills it forever makes Flush fail with an error naming it,
// instead of hanging the commit.
func TestRegistryFlushStopsAFeedbackLoop(t *testing.T) {
	r := NewRegistry()
	c := &counting{reg: r}
	c.onFlush = func() error { return c.put() }
	r.Register("loop", c, 1<<20)
	if err := c.put(); err != nil {
		t.Fatal(err)
	}
	err := r.Flush()
	if err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("Flush: %v, want an error naming the cache", err)
	}
}
