package window_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/window"
)

// A record at 70 s falls into one tumbling minute and into the two hopping windows of
// a minute, every 30 s, that hold it; its windowed key is written as Kafka Streams'
// TimeWindowedSerde writes it.
func Example() {
	tumbling := window.Tumbling(time.Minute, 10*time.Second)
	hopping := window.Hopping(time.Minute, 30*time.Second, 0)
	fmt.Println(tumbling.WindowsFor(70_000), hopping.WindowsFor(70_000))

	keys := window.TimeWindowedSerde(serde.String(), time.Minute)
	b, _ := keys.Serialize("clicks-per-minute", window.Windowed[string]{Key: "ann", Window: window.At(60_000, 120_000)})
	fmt.Printf("% x\n", b)
	w, _ := keys.Deserialize("clicks-per-minute", b)
	fmt.Println(w.Key, w.Window)
	// Output:
	// [60000] [30000 60000]
	// 61 6e 6e 00 00 00 00 00 00 ea 60
	// ann [60000,120000]
}
