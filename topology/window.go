package topology

import (
	"fmt"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"reflect"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// AddWindowStore adds a window store of (K, V) attached to the named processors, which
// then reach it with processor.WindowStore[K, V](ctx, name). size is the windows' size
// (the ends of the windows it returns), retention how long it keeps windows after the
// latest window start it was given (Kafka Streams' retention period). Its changelog
// topic is <applicationID>-<name>-changelog, with Kafka Streams' window store keys.
// Interactive queries read it with eddy.QueryWindows and the HTTP handler's
// /stores/{store}/windows routes.
func AddWindowStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], size, retention time.Duration, processors ...string) *StoreNode {
	if size.Milliseconds() <= 0 || retention.Milliseconds() <= 0 {
		b.fail("window store %q: the window size (%v) and retention (%v) must be at least 1 ms", name, size, retention)
	}
	dups := new(bool)
	sn := addTimeStore(b, name, graph.KindWindow, windowstore.WindowSegments(retention), keys, values, processors,
		func(buf *kvstore.Buffer, topic string, _ kvstore.Metrics) any {
			if *dups {
				return windowstore.NewWindowStore(buf, topic, keys, values, size, retention, windowstore.RetainDuplicates())
			}
			return windowstore.NewWindowStore(buf, topic, keys, values, size, retention)
		},
		func(be kvstore.Backend, topic string, q windowstore.Range) ([]windowstore.Raw, error) {
			return windowstore.QueryWindows(be, name, topic, size, retention, q)
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
// Interactive queries read it with eddy.QuerySessions and the HTTP handler's
// /stores/{store}/sessions routes.
func AddSessionStore[K, V any](b *Builder, name string, keys serde.Serde[K], values serde.Serde[V], retention time.Duration, processors ...string) *StoreNode {
	if retention.Milliseconds() <= 0 {
		b.fail("session store %q: the retention (%v) must be at least 1 ms", name, retention)
	}
	return addTimeStore(b, name, graph.KindSession, windowstore.SessionSegments(retention), keys, values, processors,
		func(buf *kvstore.Buffer, topic string, _ kvstore.Metrics) any {
			return windowstore.NewSessionStore(buf, topic, keys, values, retention)
		},
		func(be kvstore.Backend, topic string, q windowstore.Range) ([]windowstore.Raw, error) {
			return windowstore.QuerySessions(be, name, topic, retention, q)
		})
}

// addTimeStore registers a window or session store, kept in time segments.
func addTimeStore[K, V any](b *Builder, name, kind string, segments kvstore.SegmentSpec, keys serde.Serde[K], values serde.Serde[V], processors []string,
	newTyped func(*kvstore.Buffer, string, kvstore.Metrics) any,
	windows func(kvstore.Backend, string, windowstore.Range) ([]windowstore.Raw, error)) *StoreNode {
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
	st := &graph.Store{
		Name: name, Index: len(b.stores), Processors: processors, Logged: true,
		KeyType: reflect.TypeFor[K](), ValueType: reflect.TypeFor[V](),
		KeySerde: serdeName(keys), ValueSerde: serdeName(values),
		NewTyped: newTyped,
		Segments: &segments,
		Kind:     kind,
		Windows:  windows,
		Keys:     keys, Values: values,
		KeyFromText: func(text, topic string) ([]byte, error) {
			k, err := parseText[K](text)
			if err != nil {
				return nil, err
			}
			b, err := keys.Serialize(topic, k)
			if err == nil && b == nil {
				err = fmt.Errorf("key %q: %w", text, statestore.ErrNullKey)
			}
			return b, err
		},
		KeyToJSON: func(key []byte, topic string) (any, error) {
			return serdes.Deserialize(keys, topic, key)
		},
		ValueToJSON: func(value []byte, topic string) (any, error) {
			return serdes.Deserialize(values, topic, value)
		},
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
