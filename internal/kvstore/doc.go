// Package kvstore is the engine under the state stores of package statestore: the
// local state of a task, typed key-value stores layered over a byte-level backend that is
// one bbolt file (or memory) per task. Users see only statestore's KeyValueStore, its
// iteration helpers and its errors; the runtime, the test driver and cmd/eddy (state
// inspect, dump) use this package.
//
// # Layers
//
// A store is a stack of small layers, one concern each, as in Kafka Streams:
//
//	typed + metered   serdes and timings            (statestore.KeyValueStore[K, V], NewKeyValueStore)
//	caching           the write buffer of the open commit, read-your-writes (Buffer)
//	change-logging    one changelog record per dirty key at commit (Set.LogChanges)
//	backend           bytes in, bytes out: bbolt or memory (Backend: OpenBolt, NewMemoryBackend)
//
// Reads look at the write buffer first; Range, Prefix and All merge the buffer with a
// backend iterator in key order. Keys are kept as serialized bytes, so ranges follow the
// byte order of the key serde.
//
// # Commit protocol
//
// Writes never go straight to the backend. They wait in the write buffer until the task
// commits: the buffer's dirty keys become changelog records inside the task's Kafka
// transaction (Set.LogChanges), and only after the transaction committed are they
// written to the backend together with the changelog offsets they reflect, in one backend
// transaction (Set.Flush, sorted by key). An aborted transaction discards the buffer
// (Set.Discard). So the backend is never ahead of the changelog: it holds exactly the
// changelog's committed prefix up to its checkpoint (the offset of the next record to
// restore), and a restore replays only the tail.
//
// With Set.WriteBehind (the runtime's default, Config.StoreWriteInterval) the committed
// buffer is not written at every commit: Flush moves it into the buffer's held layer,
// read between the write buffer and the backend, and writes the held changes with their
// checkpoints once 10,000 keys are held or the interval passed (Set.WriteHeld; also
// before a restore and at Close). The backend is then some commits behind, but still
// a committed prefix with its checkpoint: a crash loses the held changes and the
// restore replays a longer tail. Interactive queries read the held layer over the
// backend (Buffer.ReadCommitted). Sets with window or session stores write at every
// Flush.
//
// Restore writes to the backend directly: Backend.Checkpoint tells where to start,
// Backend.Wipe empties a store whose checkpoint is unusable, and each write carries the
// new checkpoint. RestoreBatch turns a fetched batch of changelog records into such a
// write (deduplicated, the last record of a key winning, and sorted); Buffer.Restore
// applies one; a Restorer gathers fetches into writes of up to 100k records, which with
// bbolt restores 2.5-4 times faster than one write per 8k-record fetch ("Performance"),
// and skips the fsyncs until Finish. A store restored from empty (no checkpoint, or
// wiped) goes through a BulkRestorer instead: it gathers each key's last record in
// bounded memory (sorted runs spilled to files in the task directory above its budget),
// then merges them in key order. When the task's file is no larger than the gathered
// data, it writes a new bbolt file page by page, bottom-up, with full pages (the file's
// other buckets copied, the checkpoint added), fsyncs it once and renames it over the
// old one (boltbuild.go); otherwise it loads the keys through bbolt's Put into a
// staging bucket that its last transaction moves into place with the checkpoint
// (boltbulk.go). An interrupted bulk restore keeps no progress: the store stays empty
// with no checkpoint. A tail far larger than its store is merged into it the same way
// (NewBulkTailRestorer): the store stays at its old checkpoint until the new file is in
// place.
//
// # The task directory
//
// OpenBolt(dir) keeps a task's stores in dir:
//
//	LOCK                        flock'ed while the backend is open; holds "pid N" of the owner
//	stores.db                   the bbolt file: a bucket per store, a bucket of checkpoints
//	stores.db.state             how the file was left: open (boot ID, fsync mode), closed
//	                            (bbolt transaction ID and size), or damaged
//	stores.db.damaged-<unix>    a file found damaged, moved aside (KeepDamaged, default 1)
//	.restore-<store hex>-<n>/   sorted runs of a BulkRestorer under way (removed at its end,
//	                            and by the next bulk restore of the store after a crash)
//	stores.db.build             a new file being built (boltbuild.go), renamed over
//	                            stores.db when complete; a leftover is removed likewise
//
// # Locking
//
// One owner at a time. OpenBolt takes an exclusive flock on LOCK, polling until
// LockTimeout (default 2s), and fails with an error wrapping ErrLocked that names the
// holder's pid. flock locks belong to an open file description, so this excludes another
// goroutine of the same process as surely as another process; the kernel releases the
// lock of a process that dies. A task moving between goroutines or instances must Close
// its backend before the next owner's LockTimeout runs out. bbolt's own flock of
// stores.db stays as a second line (it only matters for programs that ignore LOCK).
// Close is idempotent and safe from any goroutine.
//
// # Durability
//
// By default every Flush (every bbolt write) is fsynced: a crash of the process or of
// the machine leaves the file at a flushed state, and restore replays only the tail.
// BoltOptions.NoSync skips the fsyncs. Measured on the project's 2-core machine
// (BENCHMARKS.md, "State stores": two runs of medians of 5), a flush into a store of
// 100k keys takes, with fsync and without:
//
//	1k dirty keys     17-20 ms     11-13 ms
//	10k dirty keys    77-92 ms     56-67 ms
//	100k dirty keys   195-257 ms   168-229 ms
//
// fsync costs 1.2-1.8x per flush, not an order of magnitude: bbolt rewrites every page
// a commit touches, and most of a flush's time is that work, fsynced or not. A restore
// through a Restorer skips the fsyncs until it finishes: 265k records/s in the default
// mode, 293k with NoSync. The default is therefore fsync: it keeps the promise that a
// crash, any crash, costs only the tail of the changelog, for a few milliseconds per
// commit. NoSync suits write-heavy tasks whose stores restore quickly.
//
// NoSync is safe against process crashes: the page cache survives, and the file is
// what bbolt wrote. A machine crash (power loss, kernel panic) is another matter: the
// disk may hold any mix of old and new pages, and a file that looks sound may still be
// stale. OpenBolt recognises that case by the boot ID recorded in the state file (Linux
// /proc/sys/kernel/random/boot_id; where there is none, every unclean close counts as a
// restart): a NoSync file left open across a restart is moved aside without being
// trusted, and the task restores its stores from offset zero.
//
// # Damage
//
// OpenBolt reads the state file, under the lock, and decides:
//
//	closed cleanly, same txid and size    cheap checks: both meta pages, the freelist, the size
//	left open, same boot (process died)   full consistency check
//	left open across a restart, fsync     full consistency check
//	left open across a restart, NoSync    move aside: not trustworthy
//	no state file, or it does not match   full consistency check
//	found damaged by its previous owner   move aside
//
// BoltOptions.Verify forces or skips the full check. The full check does not use bbolt:
// it reads the file with pread and checks every bound before following it (meta
// checksums, page ids and types, overflow, element bounds, key order within a page and
// against the parent, nested and inline buckets, pages referenced twice, the freelist),
// so a damaged file is an error, never a crash. bbolt itself trusts its file (a bad page
// id makes it fault outside its map, or panic). It checks about 1 GB/s here (0.3 s for
// a file of 1M keys); a clean open costs 5-10 ms, mostly the fsyncs of the state file.
// A file that fails is renamed to stores.db.damaged-<unix time>, logged at Error with
// the reason, and replaced by an empty file; OpenBoltReport's OpenReport tells the
// runtime (Recreated, Reason, MovedTo) so that it can count it and restore from zero.
//
// Damage found later (a page that does not parse, which the cheap checks cannot see) is
// caught too: every bbolt call runs with runtime/debug.SetPanicOnFault and a recover, so
// a panic or a memory fault inside bbolt becomes an error wrapping ErrDamaged; the
// backend refuses further work, records "damaged" in the state file, and the next open
// moves the file aside. bbolt keeps two meta pages: a damaged newer one makes it fall
// back to the previous transaction, whose checkpoint comes with it (behind the
// changelog, never ahead).
//
// bbolt options: the freelist is written at each commit (bbolt's NoFreelistSync would
// make every open walk the whole tree in a goroutine where a damaged page crashes the
// process); the array freelist flushed 15-25% faster than the hashmap one; the initial
// memory map is 1 GiB of address space, so a growing file is rarely remapped (a remap
// waits for every reader and copies every node the commit touched); NoGrowSync goes
// with NoSync.
//
// # Iterators
//
// A bbolt iterator reads its range in chunks (16 keys, doubling to 1024), each in a
// short read transaction of its own, and holds no transaction between calls. A read
// transaction held across a Write on the same goroutine deadlocks bbolt when the write
// remaps the file (the remap waits for every reader); chunking rules that out, does not
// block Close, and does not keep bbolt from reusing pages. An iterator may see a Write
// made between two of its chunks; the set's own Flush leaves the merged view unchanged
// (it moves buffered values into the backend).
//
// # Performance
//
// bbolt is a copy-on-write B+tree: a write rewrites every leaf it touches, and its
// parents. Random keys touch min(keys, leaves) leaves, so a flush of 10k random keys
// into a store of 100k keys rewrites nearly the whole file (about 5,200 pages, 21 MB),
// and costs about 10 µs of CPU per page (reading the page into a node, splitting,
// writing it back with one pwrite per page) plus garbage collection. That is where a
// flush's time goes, and why such a flush takes 56-92 ms, above the 50 ms the project
// aimed for. Fewer pages per commit is the way down: keys with locality (ordered by
// time or entity) touch few leaves. For the same reason a restore should write large
// batches: 8k records at a time write 3.3 GB for 1M records of 116 MB, 100k at a time
// 1.0 GB (Restorer).
//
// # Limits
//
// bbolt refuses keys longer than statestore.MaxKeySize (32 KiB); the typed layer refuses
// them on every backend.
// Store names starting with "__eddy_" are reserved. The file never shrinks after
// deletes; with fsync, bbolt extends it 16 MiB ahead (a sparse extension: blocks are
// allocated as pages are written). Count walks the store's pages (bbolt keeps no key
// count): cheap for metrics, not for every record.
package kvstore
