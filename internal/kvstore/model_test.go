package kvstore

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"pgregory.net/rapid"

	"github.com/eddy-streams/eddy/statestore"
)

// The model-based test: random sequences of store operations through the typed layer
// (typed → Buffer → Backend, so the merge iterator is covered), checked against a plain
// map model with the commit protocol's semantics, on both backends.

var modelStores = []string{"a", "b"}

type modelMachine struct {
	t    *testing.T
	kind string
	dir  string

	backend Backend
	set     *Set
	bufs    map[string]*Buffer
	kv      map[string]statestore.KeyValueStore[string, string]

	// the model
	committed map[string]map[string]string
	dirty     map[string]map[string]*string // nil: a buffered delete
	// sealed is the sealed layer (Set.Seal) while isSealed: the commit under way,
	// below dirty.
	sealed      map[string]map[string]*string
	isSealed    bool
	checkpoints map[string]int64
	reopens     int

	// Write-behind (Set.WriteBehind): the Set holds committed changes until a write;
	// durable is what the backend holds (and a crash leaves).
	writeBehind        bool
	now                time.Time // the Set's clock
	durable            map[string]map[string]string
	durableCheckpoints map[string]int64
	writes             int // writes of held changes seen
}

const modelHoldFor = time.Second

// wrote records that the Set wrote everything it held: the backend holds the committed
// state.
func (m *modelMachine) wrote() {
	for _, s := range modelStores {
		m.durable[s] = maps.Clone(m.committed[s])
	}
	m.durableCheckpoints = maps.Clone(m.checkpoints)
	m.writes++
}

// crashed returns the model to what the backend holds.
func (m *modelMachine) crashed() {
	for _, s := range modelStores {
		m.committed[s] = maps.Clone(m.durable[s])
	}
	m.checkpoints = maps.Clone(m.durableCheckpoints)
}

// writeHeld writes the held changes, as the runtime does before a restore.
func (m *modelMachine) writeHeld(rt *rapid.T) {
	if err := m.set.WriteHeld(); err != nil {
		rt.Fatal(err)
	}
	m.wrote()
}

func (m *modelMachine) open(rt *rapid.T) {
	if m.backend == nil || m.kind == "bolt" {
		if m.kind == "bolt" {
			b, rep, err := OpenBoltReport(m.dir, BoltOptions{NoSync: true})
			if err != nil {
				rt.Fatalf("reopen: %v", err)
			}
			if rep.Recreated {
				rt.Fatalf("reopen recreated the file: %+v", rep)
			}
			b.(*boltBackend).firstChunk = 1 // chunk boundaries everywhere: 1, 2, 4, ... keys
			m.backend = b
		} else {
			m.backend = NewMemoryBackend()
		}
	}
	// The memory backend lives on; a new Set over it is its "reopen".
	m.set = NewSet(m.backend)
	m.bufs = map[string]*Buffer{}
	m.kv = map[string]statestore.KeyValueStore[string, string]{}
	for _, name := range modelStores {
		buf, err := m.set.Register(name, true)
		if err != nil {
			rt.Fatal(err)
		}
		m.bufs[name] = buf
		m.kv[name] = NewKeyValueStore(buf, name+"-changelog", serde.String(), serde.String(), nil)
	}
	if m.writeBehind {
		m.set.WriteBehind(rapid.IntRange(1, 40).Draw(rt, "holdKeys"), modelHoldFor, func() time.Time { return m.now })
		m.set.lastWrite = m.now // no random first write: the model knows when writes are due
	}
	for _, name := range modelStores {
		m.dirty[name] = map[string]*string{}
		m.sealed[name] = map[string]*string{}
	}
	m.isSealed = false
}

func (m *modelMachine) close(rt *rapid.T) {
	if m.set != nil {
		if err := m.set.Close(); err != nil {
			rt.Fatalf("close: %v", err)
		}
	}
}

// view is the model's content of a store: committed with the sealed layer and the
// buffer over it.
func (m *modelMachine) view(store string) map[string]string {
	v := maps.Clone(m.committed[store])
	applyLayer(v, m.sealed[store])
	applyLayer(v, m.dirty[store])
	return v
}

func applyLayer(v map[string]string, layer map[string]*string) {
	for k, d := range layer {
		if d == nil {
			delete(v, k)
		} else {
			v[k] = *d
		}
	}
}

var (
	modelKey = rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 'a', 'b', 0xff}), 0, 3).Draw(t, "keybytes"))
	})
	modelValue = rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 20).Draw(t, "valuekind") {
		case 0:
			return ""
		case 1:
			return strings.Repeat("big", 2000) // larger than a page
		default:
			return fmt.Sprintf("v%d", rapid.IntRange(0, 1000).Draw(t, "v"))
		}
	})
	modelStore = rapid.SampledFrom(modelStores)
)

func (m *modelMachine) expectRange(rt *rapid.T, what string, it statestore.Iterator[string, string], err error, in func(string) bool, store string) {
	got, err := statestore.Collect(it, err)
	if err != nil {
		rt.Fatalf("%s: %v", what, err)
	}
	var want []statestore.KeyValue[string, string]
	for k, v := range m.view(store) {
		if in(k) {
			want = append(want, statestore.KeyValue[string, string]{Key: k, Value: v})
		}
	}
	slices.SortFunc(want, func(a, b statestore.KeyValue[string, string]) int { return cmp.Compare(a.Key, b.Key) })
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		rt.Fatalf("%s on %s:\n got %q\nwant %q", what, store, got, want)
	}
}

type capturedChange struct{ store, key, value string }

type changeCapture []capturedChange

func (c *changeCapture) WriteChange(store string, key, value []byte) error {
	v := "<nil>"
	if value != nil {
		v = string(value)
	}
	*c = append(*c, capturedChange{store, string(key), v})
	return nil
}

func (m *modelMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"put": func(rt *rapid.T) {
			s, k, v := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "key"), modelValue.Draw(rt, "value")
			if err := m.kv[s].Put(k, v); err != nil {
				rt.Fatal(err)
			}
			m.dirty[s][k] = &v
		},
		"delete": func(rt *rapid.T) {
			s, k := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "key")
			if err := m.kv[s].Delete(k); err != nil {
				rt.Fatal(err)
			}
			m.dirty[s][k] = nil
		},
		"putIfAbsent": func(rt *rapid.T) {
			s, k, v := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "key"), modelValue.Draw(rt, "value")
			old, existed, err := m.kv[s].PutIfAbsent(k, v)
			if err != nil {
				rt.Fatal(err)
			}
			want, wantExisted := m.view(s)[k]
			if existed != wantExisted || old != want {
				rt.Fatalf("PutIfAbsent(%q) = %q,%v; want %q,%v", k, old, existed, want, wantExisted)
			}
			if !existed {
				m.dirty[s][k] = &v
			}
		},
		"get": func(rt *rapid.T) {
			s, k := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "key")
			got, ok, err := m.kv[s].Get(k)
			if err != nil {
				rt.Fatal(err)
			}
			want, wantOK := m.view(s)[k]
			if ok != wantOK || got != want {
				rt.Fatalf("Get(%s, %q) = %q,%v; want %q,%v", s, k, got, ok, want, wantOK)
			}
		},
		"range": func(rt *rapid.T) {
			s, from, to := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "from"), modelKey.Draw(rt, "to")
			it, err := m.kv[s].Range(from, to)
			m.expectRange(rt, fmt.Sprintf("Range(%q, %q)", from, to), it, err, func(k string) bool { return from <= k && k < to }, s)
		},
		"prefix": func(rt *rapid.T) {
			s, p := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "prefix")
			it, err := m.kv[s].Prefix(p)
			m.expectRange(rt, fmt.Sprintf("Prefix(%q)", p), it, err, func(k string) bool { return strings.HasPrefix(k, p) }, s)
		},
		"all": func(rt *rapid.T) {
			s := modelStore.Draw(rt, "store")
			it, err := m.kv[s].All()
			m.expectRange(rt, "All", it, err, func(string) bool { return true }, s)
		},
		"count": func(rt *rapid.T) {
			s := modelStore.Draw(rt, "store")
			n, err := m.kv[s].ApproximateCount()
			if err != nil {
				rt.Fatal(err)
			}
			if want := int64(len(m.view(s))); n != want {
				rt.Fatalf("ApproximateCount(%s) = %d; want %d", s, n, want)
			}
		},
		"logChanges": func(rt *rapid.T) {
			var got changeCapture
			if err := m.set.LogChanges(&got); err != nil {
				rt.Fatal(err)
			}
			var want changeCapture
			for _, s := range modelStores {
				for _, k := range slices.Sorted(maps.Keys(m.dirty[s])) {
					v := "<nil>"
					if d := m.dirty[s][k]; d != nil {
						v = *d
					}
					want = append(want, capturedChange{s, k, v})
				}
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				rt.Fatalf("LogChanges:\n got %q\nwant %q", got, want)
			}
		},
		"flush": func(rt *rapid.T) {
			cps := map[string]int64{}
			for _, s := range modelStores {
				if rapid.Bool().Draw(rt, "checkpoint "+s) {
					cps[s] = rapid.Int64Range(0, 1<<40).Draw(rt, "offset")
				}
			}
			if err := m.set.Flush(cps); err != nil {
				rt.Fatal(err)
			}
			held, heldCheckpoints := 0, 0
			for _, s := range modelStores {
				// The sealed layer commits, the write buffer above it stays; with
				// none sealed, the write buffer commits.
				if m.isSealed {
					applyLayer(m.committed[s], m.sealed[s])
					m.sealed[s] = map[string]*string{}
				} else {
					applyLayer(m.committed[s], m.dirty[s])
					m.dirty[s] = map[string]*string{}
				}
				held += len(m.bufs[s].held)
				if m.bufs[s].hasHeldCheckpoint {
					heldCheckpoints++
				}
			}
			maps.Copy(m.checkpoints, cps)
			if held == 0 && heldCheckpoints == 0 {
				m.wrote()
			} else if !m.writeBehind {
				rt.Fatalf("a Set without WriteBehind holds %d keys after Flush", held)
			}
			m.isSealed = false
			if want := len(m.dirty["a"]) + len(m.dirty["b"]); m.set.Dirty() != want || m.set.Sealed() {
				rt.Fatalf("Dirty() = %d, Sealed() = %v after Flush; want %d, false", m.set.Dirty(), m.set.Sealed(), want)
			}
		},
		"seal": func(rt *rapid.T) {
			err := m.set.Seal()
			if m.isSealed {
				if !errors.Is(err, ErrSealed) {
					rt.Fatalf("Seal while sealed: %v; want ErrSealed", err)
				}
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			want := 0
			for _, s := range modelStores {
				m.sealed[s], m.dirty[s] = m.dirty[s], map[string]*string{}
				want += len(m.sealed[s])
			}
			m.isSealed = true
			if m.set.Dirty() != 0 || m.set.ToFlush() != want {
				rt.Fatalf("after Seal: Dirty() = %d, ToFlush() = %d; want 0, %d", m.set.Dirty(), m.set.ToFlush(), want)
			}
		},
		"tick": func(rt *rapid.T) {
			m.now = m.now.Add(time.Duration(rapid.Int64Range(0, int64(2*modelHoldFor)).Draw(rt, "tick")))
		},
		"writeHeld": func(rt *rapid.T) {
			m.writeHeld(rt)
		},
		"discard": func(rt *rapid.T) {
			m.set.Discard()
			for _, s := range modelStores {
				m.dirty[s] = map[string]*string{}
				m.sealed[s] = map[string]*string{}
			}
			m.isSealed = false
		},
		"snapshot": func(rt *rapid.T) {
			// A reader on another goroutine (a stale query of a task that does not
			// run) sees the committed state and its checkpoint: held changes too.
			s, k := modelStore.Draw(rt, "store"), modelKey.Draw(rt, "key")
			var got []byte
			snap, err := m.bufs[s].ReadCommittedSnapshot(func(b Backend) (snap Snapshot, err error) {
				got, snap, err = GetAt(b, s, []byte(k))
				return snap, err
			})
			if err != nil {
				rt.Fatal(err)
			}
			want, wantOK := m.committed[s][k]
			if (got != nil) != wantOK || string(got) != want {
				rt.Fatalf("snapshot GetAt(%s, %q) = %q; want %q,%v", s, k, got, want, wantOK)
			}
			var all []Entry
			snap2, err := m.bufs[s].ReadCommittedSnapshot(func(b Backend) (Snapshot, error) { return ScanAt(b, s, nil, nil, &all) })
			if err != nil {
				rt.Fatal(err)
			}
			scanned := map[string]string{}
			for _, e := range all {
				scanned[string(e.Key)] = string(e.Value)
			}
			if !maps.Equal(scanned, m.committed[s]) {
				rt.Fatalf("snapshot ScanAt(%s) = %q; want %q", s, scanned, m.committed[s])
			}
			cp, cpOK := m.checkpoints[s]
			for _, sn := range []Snapshot{snap, snap2} {
				if sn.HasCheckpoint != cpOK || sn.Checkpoint != cp {
					rt.Fatalf("snapshot of %s at checkpoint %d,%v; want %d,%v", s, sn.Checkpoint, sn.HasCheckpoint, cp, cpOK)
				}
			}
		},
		"checkpoint": func(rt *rapid.T) {
			for _, s := range append(modelStores, "unknown") {
				off, ok, err := m.backend.Checkpoint(s)
				if err != nil {
					rt.Fatal(err)
				}
				want, wantOK := m.durableCheckpoints[s]
				if ok != wantOK || off != want {
					rt.Fatalf("Checkpoint(%s) = %d,%v; want %d,%v", s, off, ok, want, wantOK)
				}
			}
		},
		"restore": func(rt *rapid.T) {
			s := modelStore.Draw(rt, "store")
			n := rapid.IntRange(0, 20).Draw(rt, "records")
			var recs []Entry
			for range n {
				e := Entry{Key: []byte(modelKey.Draw(rt, "key"))}
				if rapid.IntRange(0, 3).Draw(rt, "tombstone") > 0 {
					e.Value = []byte(modelValue.Draw(rt, "value"))
				}
				recs = append(recs, e)
			}
			next := rapid.Int64Range(0, 1<<40).Draw(rt, "next")
			if len(m.bufs[s].held) > 0 {
				if err := m.bufs[s].Restore(recs, next); err == nil {
					rt.Fatal("Restore with held changes succeeded")
				}
			}
			m.writeHeld(rt) // as the runtime does before a restore
			err := m.bufs[s].Restore(recs, next)
			if len(m.dirty[s])+len(m.sealed[s]) > 0 {
				if err == nil {
					rt.Fatal("Restore with buffered changes succeeded")
				}
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			applyModel(m.committed[s], recs)
			m.checkpoints[s] = next
			m.wrote()
		},
		"wipe": func(rt *rapid.T) {
			s := modelStore.Draw(rt, "store")
			m.writeHeld(rt) // a wipe comes with a restore
			if err := m.backend.Wipe(s); err != nil {
				rt.Fatal(err)
			}
			m.committed[s] = map[string]string{}
			delete(m.checkpoints, s)
			m.wrote()
		},
		"reopen": func(rt *rapid.T) {
			m.reopens++
			if m.kind == "bolt" && rapid.Bool().Draw(rt, "crash") {
				abandon(m.t, m.backend) // as a dying process: no sync, no clean close
				m.crashed()             // what was held is lost
			} else if m.kind == "bolt" {
				if err := m.set.Close(); err != nil {
					rt.Fatal(err)
				}
				m.wrote() // a clean close writes what was held
			} else {
				m.crashed() // the memory backend's Set is dropped, its held changes with it
			}
			m.open(rt) // the model's buffers start empty, as the new Set's
		},
	}
}

func TestStoreModel(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "memory-writebehind", "bolt-writebehind"} {
		t.Run(kind, func(t *testing.T) {
			kind, writeBehind := strings.CutSuffix(kind, "-writebehind")
			root := t.TempDir()
			runs := 0
			rapid.Check(t, func(rt *rapid.T) {
				runs++
				dir, err := os.MkdirTemp(root, "run")
				if err != nil {
					rt.Fatal(err)
				}
				m := &modelMachine{t: t, kind: kind, dir: dir,
					committed:   map[string]map[string]string{"a": {}, "b": {}},
					dirty:       map[string]map[string]*string{},
					sealed:      map[string]map[string]*string{},
					checkpoints: map[string]int64{},
					writeBehind: writeBehind, now: time.Unix(1e9, 0),
					durable:            map[string]map[string]string{"a": {}, "b": {}},
					durableCheckpoints: map[string]int64{},
				}
				m.open(rt)
				defer m.close(rt)
				rt.Repeat(m.actions())
			})
		})
	}
}
