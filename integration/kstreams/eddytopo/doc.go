// Package eddytopo holds the eddy DSL versions of the differential topologies (T1–T10
// of the Kafka Streams comparison): each constructor builds on the given topics what
// the Kafka Streams harness builds with the same operators, so the two can be fed the
// same input and their output topics compared record by record.
//
// Serdes: keys String; values String or Int64 (Kafka's LongSerializer). Input values
// may be null (tombstones), so sources read values with serde.Nullable, and outputs
// that may carry tombstones are written with it.
//
// Case mapping: Go's strings.ToLower/ToUpper map rune by rune; Java's
// String.toLowerCase/toUpperCase apply Unicode's special casing (ß → SS, İ → i̇). T1
// splits with kstreams.Words, which does what Java does with İ (the one character whose
// special lower case reaches [a-zA-Z0-9_]); T7 upper-cases with strings.ToUpper, and
// kstreams.Inputs keeps T7's values free of characters that Java maps to several.
package eddytopo

import "github.com/eddy-streams/eddy/serde"

var (
	str  = serde.String()
	nstr = serde.Nullable(serde.String())
	i64  = serde.Int64()
	ni64 = serde.Nullable(serde.Int64())
)
