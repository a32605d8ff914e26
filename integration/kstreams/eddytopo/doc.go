// Package eddytopo holds the eddy DSL versions of the differential topologies (T1–T7
// of the Kafka Streams comparison): each constructor builds on the given topics what
// the Kafka Streams harness builds with the same operators, so the two can be fed the
// same input and their output topics compared record by record.
//
// Serdes: keys String; values String or Int64 (Kafka's LongSerializer). Input values
// may be null (tombstones), so sources read values with serde.Nullable, and outputs
// that may carry tombstones are written with it.
//
// Case mapping: T1 lower-cases and T7 upper-cases with Go's strings.ToLower/ToUpper,
// which map rune by rune; Java's String.toLowerCase/toUpperCase apply Unicode's special
// casing (ß → SS, İ → i̇), so for equal output the generated values should be ASCII, as
// T1's \W (ASCII-only in Java) keeps only ASCII words anyway.
package eddytopo

import "github.com/eddy-streams/eddy/serde"

var (
	str  = serde.String()
	nstr = serde.Nullable(serde.String())
	i64  = serde.Int64()
	ni64 = serde.Nullable(serde.Int64())
)
