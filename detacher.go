package eddy

import "github.com/IBM/sarama"

// detacher copies the bytes of consumed records out of their fetch responses. A
// sarama record's key, value and headers are slices of the whole fetch response, which
// holds every partition the broker returned (up to Fetch.Default bytes each): a record
// waiting in an inbox, or kept for replay until its transaction commits, would keep the
// whole response alive. With many tasks that was most of the heap (32 tasks: 120 MB of
// responses for 15 MB of records). The copies go into chunks owned by one claim, so a
// record costs a copy and no allocation of its own.
type detacher struct {
	chunk []byte
}

const detachChunk = 64 << 10

// detach makes msg's key, value and headers independent of the fetch response.
func (d *detacher) detach(msg *sarama.ConsumerMessage) {
	msg.Key = d.copy(msg.Key)
	msg.Value = d.copy(msg.Value)
	for _, h := range msg.Headers {
		if h != nil {
			h.Key, h.Value = d.copy(h.Key), d.copy(h.Value)
		}
	}
}

// copy returns a copy of b, nil for nil (a tombstone stays a tombstone) and non-nil
// for an empty b.
func (d *detacher) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) > detachChunk/8 {
		return append(make([]byte, 0, len(b)), b...)
	}
	if d.chunk == nil || cap(d.chunk)-len(d.chunk) < len(b) {
		d.chunk = make([]byte, 0, detachChunk)
	}
	start := len(d.chunk)
	d.chunk = append(d.chunk, b...)
	return d.chunk[start:len(d.chunk):len(d.chunk)]
}
