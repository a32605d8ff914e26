package eddy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// The offsets record (see taskRunner.writeOffsets) holds, per source topic of a task, the
// offset its last committed transaction consumed up to, with the topic's ID, and one
// record that names the transaction.

// commitKey is the key of the record that names the transaction the offsets record
// belongs to: its value is a random 8-byte nonce drawn for each transaction. A topic name
// cannot contain a NUL byte, so it never meets a topic's record. After a commit whose
// outcome is unknown, the task reads the record back once the transaction is settled: its
// own nonce means the transaction committed.
const commitKey = "\x00commit"

// encodeOffset makes the value of a topic's record: the offset, 8 bytes big-endian, and,
// when known, the topic's 16-byte ID. An offset recorded for a topic that was since
// deleted and created anew must not hold for the new one (it would skip its records).
func encodeOffset(offset int64, id sarama.Uuid) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 24), uint64(offset))
	if id != (sarama.Uuid{}) {
		v = append(v, id[:]...)
	}
	return v
}

var errBadOffsetRecord = errors.New("malformed offsets record")

// decodeOffset reads a topic's record. Records written before topic IDs were recorded
// are 8 bytes long and have a zero ID.
func decodeOffset(v []byte) (offset int64, id sarama.Uuid, err error) {
	switch len(v) {
	case 8:
	case 24:
		copy(id[:], v[8:])
	default:
		return 0, id, fmt.Errorf("%w: %d bytes, want 8 or 24", errBadOffsetRecord, len(v))
	}
	offset = int64(binary.BigEndian.Uint64(v))
	if offset < 0 {
		return 0, id, fmt.Errorf("%w: negative offset %d", errBadOffsetRecord, offset)
	}
	return offset, id, nil
}

// topicIDs returns the IDs of topics (Kafka 2.8+ metadata); a topic missing from the
// answer, or a broker too old to give IDs, has none. Errors are the caller's to log:
// without IDs the task still refuses a floor above a partition's end (see readFloors).
func (rt *runtime) topicIDs(topics []string) (map[string]sarama.Uuid, error) {
	broker := rt.client.LeastLoadedBroker() // opened by sarama
	if broker == nil {
		return nil, errors.New("no broker to ask for topic IDs")
	}
	resp, err := broker.GetMetadata(sarama.NewMetadataRequest(rt.sc.Version, topics))
	if err != nil {
		return nil, err
	}
	ids := map[string]sarama.Uuid{}
	for _, t := range resp.Topics {
		if errors.Is(t.Err, sarama.ErrNoError) && t.Uuid != (sarama.Uuid{}) {
			ids[t.Name] = t.Uuid
		}
	}
	return ids, nil
}
