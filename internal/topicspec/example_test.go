package topicspec_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/internal/topicspec"
)

func ExampleChangelog() {
	spec := topicspec.Changelog("wordcount", "counts", 4)
	fmt.Println(spec.Name, spec.Partitions, spec.Configs["cleanup.policy"])
	// Output:
	// wordcount-counts-changelog 4 compact
}

func ExampleRepartition() {
	spec := topicspec.Repartition("wordcount", "words", 3)
	fmt.Println(spec.Name, spec.Partitions, spec.Configs["cleanup.policy"], spec.Configs["retention.ms"])
	// Output:
	// wordcount-words-repartition 3 delete -1
}
