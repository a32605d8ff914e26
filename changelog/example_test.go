package changelog_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/changelog"
)

func ExampleChangelogSpec() {
	spec := changelog.ChangelogSpec("wordcount", "counts", 4)
	fmt.Println(spec.Name, spec.Partitions, spec.Configs["cleanup.policy"])
	fmt.Println(changelog.RepartitionTopicName("wordcount", "words"))
	// Output:
	// wordcount-counts-changelog 4 compact
	// wordcount-words-repartition
}
