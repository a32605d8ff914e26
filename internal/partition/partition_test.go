package partition

import "testing"

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2MatchesKafka(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := Murmur2([]byte(in)); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestForKeyInRange(t *testing.T) {
	for i := 0; i < 1000; i++ {
		k := []byte{byte(i), byte(i >> 8), 7}
		if p := ForKey(k, 7); p < 0 || p >= 7 {
			t.Fatalf("ForKey = %d, out of [0,7)", p)
		}
	}
}
