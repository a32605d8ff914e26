// Package kafkatest runs eddy's tests, and yours, against Kafka: an embedded
// broker that needs nothing installed, and a harness that runs the same test
// against the embedded broker and a real Apache Kafka.
//
// # Embedded broker
//
// [NewBroker] (or [Start] in a test) starts an in-process Kafka-compatible
// broker on 127.0.0.1 with an ephemeral port. It is franz-go's kfake: it
// speaks the Kafka protocol, including idempotent and transactional
// producers, consumer groups, read_committed fetches and the admin API, so
// an eddy application, sarama, or any other Kafka client talks to it as to a
// real cluster (the differences that matter are in docs/kafka-notes.md).
// State lives in memory and disappears at [Broker.Close].
//
// # Embedded and real Kafka
//
// [ForEachCluster] runs a test twice as subtests: "embedded", always, and
// "kafka", against the real cluster named by the environment variable
// EDDY_TEST_BROKERS (comma-separated host:port list) when it is set, skipped
// otherwise. The repository's test.sh starts a real single-node Kafka with
// integration/kafka.sh and sets the variable. A real cluster outlives tests
// and test runs, so name topics and groups with [Cluster.Unique].
//
// [Cluster] also has the helpers an exactly-once test needs: create topics,
// produce, read everything committed (read_committed, up to the last stable
// offset), end offsets under either isolation level, a group's committed
// offsets, and a wait for "no transaction open on this topic".
//
// # Testing an application
//
// [ProduceTyped] and [ReadCommittedTyped] write and read typed records with eddy's
// serdes. [Cluster.WaitProcessed] waits until an application has processed and
// committed everything written to the topics it reads ([InputTopics] lists them,
// repartition topics included): produce the input, wait, stop the application, then
// read its output. examples/shop in the repository does exactly that.
//
// # Dependencies
//
// This package is public and imports franz-go's kfake, so eddy's go.mod requires
// franz-go. That costs an application nothing unless it imports kafkatest: Go compiles
// and links only the packages a program imports, so no package of eddy but this one
// (and the repository's examples and integration harness, which use it) pulls franz-go
// into a build; `go list -deps` of the root package and of every other public package
// lists none of it. The module's requirement shows in a user's module graph (and
// go.sum) as any test-only dependency does. Kept public on purpose: an application
// tests itself against the same embedded broker eddy is tested against, with nothing
// installed. A separate module for it would save that go.sum entry at the price of
// versioning two modules in lock step; it is not worth it while kfake is the one heavy
// dependency here.
//
// eddy builds kfake from a patched copy in its repository (third_party/kfake, through
// a replace directive in eddy's go.mod): upstream kfake moves a group's rebalance
// deadline with every join, which can keep a group rebalancing for good (the fix and
// its test are described there). Go applies replace directives of the main module
// only, so an application that imports kafkatest builds upstream kfake unless its own
// go.mod has the same replace (pointing at a copy of eddy's third_party/kfake).
//
// # sarama configuration
//
// [NewSaramaConfig] returns the sarama configuration these helpers use; its
// Version (sarama.V4_0_0_0) works against both the embedded broker and
// Kafka 4.1. docs/kafka-notes.md in the repository records the protocol
// facts and quirks the smoke tests of this package establish.
package kafkatest
