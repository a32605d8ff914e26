// Package partition chooses partitions the way Kafka's Java producer does, so records
// eddy writes land where a Java producer (or Kafka Streams) would put them, and topics
// stay co-partitioned with theirs.
package partition

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2).
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n4 := length / 4
	for i := 0; i < n4; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ForKey returns the partition Kafka's default partitioner gives a non-nil key among n:
// toPositive(murmur2(key)) % n.
func ForKey(key []byte, n int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % n
}
