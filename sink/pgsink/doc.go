// Package pgsink delivers eddy's records into PostgreSQL (pgx v5), in one of three
// modes (docs/architecture.md, "Sinks beyond Kafka").
//
// # Two-phase commit (NewTwoPhase): exactly-once
//
// Each task's rows of one eddy commit go into one PostgreSQL transaction, kept in
// memory until the pre-commit (up to Options.MaxBufferedRows) and then written in
// batches (COPY for a table without Key, one INSERT … SELECT FROM unnest(…) ON
// CONFLICT … DO UPDATE statement per batch with one), together with a marker row
// (Options.Markers, eddy_sink_commits). Before the Kafka transaction commits, eddy
// prepares it (PREPARE TRANSACTION '<ID>': durable, invisible, survives a crash of
// PostgreSQL or of the application); after, it commits it (COMMIT PREPARED, from any
// connection). At every task start eddy lists the task's prepared transactions
// (pg_prepared_xacts) and commits the one its last committed Kafka transaction names,
// rolling back the others. Readers see each commit's rows all at once, only once the
// Kafka transaction committed, and never twice.
//
// Costs: per task and commit, one transaction (a pooled connection, held from its
// first statement to its PREPARE, which is during the pre-commit unless a unit of work
// buffers more than MaxBufferedRows rows; then the pool needs a connection for each
// such task of a worker) and three extra round trips (marker, PREPARE, COMMIT
// PREPARED); the rows of a unit of work in memory; between PREPARE and COMMIT PREPARED the rows stay locked, so a reader
// that updates the same rows waits up to a commit. A prepared transaction that is left
// behind (the application down) keeps its locks and holds back VACUUM's horizon until
// the application's next start finishes it: `eddy sinks pending` lists them.
//
// Server: max_prepared_transactions > 0 (PostgreSQL's default is 0: NewTwoPhase
// refuses to start and says how to set it; it needs a restart), at least the number of
// tasks writing at once. The pool's user must be the one that finishes the
// transactions (PostgreSQL lets only the preparing user, or a superuser, commit one).
// Exactly-once only: eddy refuses two-phase commit under at-least-once.
//
// # Idempotent upserts (NewUpsert): at-least-once that converges
//
// Rows are keyed by Table.Key and carry the source partition and offset of the record
// that wrote them (Table.PartitionColumn and OffsetColumn, eddy_partition and
// eddy_offset by default): INSERT … ON CONFLICT (key) DO UPDATE … WHERE the stored
// offset of the same partition is not later. Each batch (Options.BatchRows) commits
// as soon as it is full, and Prepare commits the rest. A replay writes
// the same rows again and never moves a row back to an older value. A reader may see
// the rows of an eddy commit that is later aborted, until the replay rewrites them;
// with at-least-once, rows of records that a crash makes eddy process again are
// rewritten with the same values. Records a punctuator forwards carry no offset (-1)
// and only replace rows written the same way. A key written from two topics or
// partitions (a join's sides) needs Table.TopicColumn; rows from another source are
// replaced whatever their offsets.
//
// Costs: one transaction per task and commit, no lock held past it, no server
// setting. The table needs a primary key or unique index on the Key columns.
//
// # Write-ahead (Pipe): a sink application, exactly-once without Kafka transactions
//
// A Pipe reads a topic with read_committed and writes each batch of records and the
// next offsets of its partition in one PostgreSQL transaction; it starts each
// partition from the offset stored there (table eddy_sink_offsets), never from
// Kafka's committed offsets. The offsets row fences a partition's previous owner: a
// batch commits only if the row still holds the offset the batch started from.
//
// Costs: one transaction per batch; no prepared transactions, no server setting. It
// is a consumer of its own (not a topology node): use it to copy a topic eddy writes
// (exactly-once) into a table.
//
// # Table mapping and errors
//
// Table maps a record to its columns with a function (see Table for why not struct
// tags). The targets check the table at start: a missing table or column fails with
// the CREATE TABLE expected. A record the database refuses (a constraint or a type)
// fails Prepare (or the Write that writes its batch) with an error naming its topic,
// partition and offset. A refused login fails at once and says to check the DSN. The
// database down or restarting gives errors for which Retriable is true: eddy aborts
// the Kafka transaction and replays, or (after its Kafka commit) retries the commit
// until it succeeds; nothing is skipped.
package pgsink
