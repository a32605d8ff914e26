package topology

import (
	"fmt"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"reflect"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
)

// AddWindowStore adds a window store of (K, V) attached to the named processors, which
// then reach it with processor.WindowStore[K, V](ctx, name). size is the windows' size
// (the ends of the windows it returns), retention how long it keeps windows after the
// latest window start it was given (Kafka Streams' retention period). Its changelog
// topic is <applicationID>-<name>-changelog, with Kafka Streams' window store keys.
func AddWindowStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], size, retention time.Duration, processors ...string) *StoreNode {
	if size.Milliseconds() <= 0 || retention.Milliseconds() <= 0 {
		b.fail("window store %q: the window size (%v) and retention (%v) must be at least 1 ms", name, size, retention)
	}
	dups := new(bool)
	sn := b.addTimeStore(name, "window", keys, values, reflect.TypeFor[K](), reflect.TypeFor[V](), processors,
		func(buf *kvstore.Buffer, topic string, _ kvstore.Metrics) any {
			if *dups {
				return windowstore.NewWindowStore(buf, topic, keys, values, size, retention, windowstore.RetainDuplicates())
			}
			return windowstore.NewWindowStore(buf, topic, keys, values, size, retention)
		})
	sn.dups = dups
	return sn
}

// RetainDuplicates makes a window store keep every value put, even several of one key
// and window start (Kafka Streams' retainDuplicates, the buffers of stream–stream
// joins); a null value is not stored. Fetch of a single window then finds nothing: read
// such a store with FetchRange. Only window stores take it.
func (s *StoreNode) RetainDuplicates() *StoreNode {
	if s.dups != nil {
		*s.dups = true
	}
	return s
}

// AddSessionStore adds a session store of (K, V) attached to the named processors, which
// then reach it with processor.SessionStore[K, V](ctx, name). retention is how long it
// keeps sessions after the latest session end it was given. Its changelog topic is
// <applicationID>-<name>-changelog, with Kafka Streams' session store keys.
func AddSessionStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], retention time.Duration, processors ...string) *StoreNode {
	if retention.Milliseconds() <= 0 {
		b.fail("session store %q: the retention (%v) must be at least 1 ms", name, retention)
	}
	return b.addTimeStore(name, "session", keys, values, reflect.TypeFor[K](), reflect.TypeFor[V](), processors,
		func(buf *kvstore.Buffer, topic string, _ kvstore.Metrics) any {
			return windowstore.NewSessionStore(buf, topic, keys, values, retention)
		})
}

// addTimeStore registers a window or session store. Interactive queries of such stores
// (eddy.Query, the HTTP handler) are not there yet: they answer with an error naming the
// kind of store.
func (b *Builder) addTimeStore(name, kind string, keys, values any, kt, vt reflect.Type, processors []string, newTyped func(*kvstore.Buffer, string, kvstore.Metrics) any) *StoreNode {
	for _, s := range b.stores {
		if s.Name == name {
			b.fail("duplicate store name %q", name)
			return &StoreNode{store: &graph.Store{}}
		}
	}
	if name == "" {
		b.fail("a store has an empty name")
	}
	b.checkTopicPart("store", name)
	if strings.HasPrefix(name, names.OffsetsStorePrefix) {
		b.fail("store name %q: names starting with %q are eddy's own", name, names.OffsetsStorePrefix)
	}
	unsupported := fmt.Errorf("store %q is a %s store: queries by key of window and session stores are not supported yet", name, kind)
	st := &graph.Store{
		Name: name, Index: len(b.stores), Processors: processors, Logged: true,
		KeyType: kt, ValueType: vt,
		KeySerde: serdeName(keys), ValueSerde: serdeName(values),
		NewTyped:    newTyped,
		KeyFromText: func(string, string) ([]byte, error) { return nil, unsupported },
		ValueToJSON: func([]byte, string) (any, error) { return nil, unsupported },
	}
	b.stores = append(b.stores, st)
	return &StoreNode{store: st}
}

func serdeName(s any) string {
	if n, ok := s.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
}
