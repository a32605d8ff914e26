package changelog_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/changelog"
)

func ExampleTopicName() {
	fmt.Println(changelog.TopicName("wordcount", "counts"))
	fmt.Println(changelog.RepartitionTopicName("wordcount", "words"))
	// Output:
	// wordcount-counts-changelog
	// wordcount-words-repartition
}
