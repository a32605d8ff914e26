// Package statestore is what a processor sees of its task's local state: typed
// key-value stores (KeyValueStore), sequences over them for range loops (All, Range,
// Prefix), window and session stores (WindowStore, SessionStore: values per key and time
// window, kept for a retention period, with Kafka Streams' changelog key layouts), and
// the errors a store operation can return.
//
// A processor gets its stores from its context (processor.KeyValueStore) under the names the
// topology declared; the runtime opens, restores and commits them. Every write is kept
// in the task's write buffer until the task commits: it becomes a changelog record
// inside the task's Kafka transaction and reaches the local file (bbolt, one per task)
// only after that transaction committed, so a task's state never runs ahead of its
// changelog, and a task that moves to another instance restores exactly the committed
// state. Reads see the task's own uncommitted writes.
//
// Keys are kept as serialized bytes: Range and Prefix follow the byte order of the key
// serde (see serde.OrderPreserving). A key may not serialize to null (ErrNullKey) or to
// more than MaxKeySize bytes (ErrKeyTooLarge); errors name the store they happened in
// (StoreError). Iterators hold resources until closed; All, Range and Prefix close them
// when the loop ends.
//
// The engine under the stores (write buffer, backends, restore, the state file and its
// lock, inspection) is internal to the module; `eddy state inspect` and `eddy state
// dump` show a task's files to an operator.
package statestore
