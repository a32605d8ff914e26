package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eddy-streams/eddy/internal/windowkey"
	"github.com/eddy-streams/eddy/serde"
)

// undecodableMarker starts the rendering of bytes a serde could not decode; the hex of
// the bytes follows.
const undecodableMarker = "!hex:"

// decoder renders stored bytes as text on one line (no tab, no newline).
type decoder struct {
	name   string
	decode func(data []byte) (string, error)
}

// serdeNames lists the names --key-serde and --value-serde accept.
const serdeNames = "string, bytes, int64, int32, float64, json; timestamped:<one of those> for the values of DSL stores; window:<one of those> and session:<one of those> for the keys of window and session stores"

// newDecoder returns the decoder of a serde name (case-insensitive; Kafka's names Long,
// Integer and Double work too). It decodes with the serde package's serdes, byte-
// compatible with Kafka's Java serializers.
func newDecoder(name string) (decoder, error) {
	const topic = "" // stores have no topic
	// The stores of DSL tables and aggregations hold stream.Timestamped values: 8 bytes
	// of timestamp (milliseconds, big-endian), then the value (Kafka Streams'
	// ValueAndTimestamp layout); printed "value@timestamp" (issue 26: they printed as
	// hex, as no serde decoded them).
	if inner, ok := strings.CutPrefix(strings.ToLower(name), "timestamped:"); ok {
		d, err := newDecoder(inner)
		if err != nil {
			return decoder{}, err
		}
		return decoder{"timestamped:" + d.name, func(b []byte) (string, error) {
			if len(b) < 8 {
				return "", fmt.Errorf("a timestamped value needs at least 8 bytes, got %d", len(b))
			}
			v, err := d.decode(b[8:])
			if err != nil {
				return "", err
			}
			return v + "@" + strconv.FormatInt(int64(binary.BigEndian.Uint64(b[:8])), 10), nil
		}}, nil
	}
	// The keys of window stores are key | window start | sequence number, those of
	// session stores key | end | start (Kafka Streams' changelog layouts,
	// internal/windowkey); printed key@start (#seqnum when a store keeping duplicates,
	// a stream-stream join's, numbered it) and key@start..end (issue 26: they printed as
	// hex).
	if inner, ok := strings.CutPrefix(strings.ToLower(name), "window:"); ok {
		d, err := newDecoder(inner)
		if err != nil {
			return decoder{}, err
		}
		return decoder{"window:" + d.name, func(b []byte) (string, error) {
			key, start, seq, err := windowkey.SplitWindowStore(b)
			if err != nil {
				return "", err
			}
			k, err := d.decode(key)
			if err != nil {
				return "", err
			}
			out := k + "@" + strconv.FormatInt(start, 10)
			if seq != 0 {
				out += "#" + strconv.FormatInt(int64(seq), 10)
			}
			return out, nil
		}}, nil
	}
	if inner, ok := strings.CutPrefix(strings.ToLower(name), "session:"); ok {
		d, err := newDecoder(inner)
		if err != nil {
			return decoder{}, err
		}
		return decoder{"session:" + d.name, func(b []byte) (string, error) {
			key, start, end, err := windowkey.SplitSession(b)
			if err != nil {
				return "", err
			}
			if end < start {
				return "", fmt.Errorf("a session key's end %d is before its start %d", end, start)
			}
			k, err := d.decode(key)
			if err != nil {
				return "", err
			}
			return k + "@" + strconv.FormatInt(start, 10) + ".." + strconv.FormatInt(end, 10), nil
		}}, nil
	}
	switch strings.ToLower(name) {
	case "string":
		return decoder{"string", func(b []byte) (string, error) {
			s, err := serde.String().Deserialize(topic, b)
			if err != nil {
				return "", err
			}
			if !utf8.ValidString(s) {
				return "", fmt.Errorf("not UTF-8")
			}
			if strings.ContainsFunc(s, unicode.IsControl) {
				return strconv.Quote(s), nil // keep tabs and newlines out of the line format
			}
			return s, nil
		}}, nil
	case "bytes", "hex":
		return decoder{"bytes", func(b []byte) (string, error) {
			v, err := serde.Bytes().Deserialize(topic, b)
			return hex.EncodeToString(v), err
		}}, nil
	case "int64", "long":
		return decoder{"int64", func(b []byte) (string, error) {
			v, err := serde.Int64().Deserialize(topic, b)
			return strconv.FormatInt(v, 10), err
		}}, nil
	case "int32", "int", "integer":
		return decoder{"int32", func(b []byte) (string, error) {
			v, err := serde.Int32().Deserialize(topic, b)
			return strconv.FormatInt(int64(v), 10), err
		}}, nil
	case "float64", "double":
		return decoder{"float64", func(b []byte) (string, error) {
			v, err := serde.Float64().Deserialize(topic, b)
			return strconv.FormatFloat(v, 'g', -1, 64), err
		}}, nil
	case "json":
		return decoder{"json", func(b []byte) (string, error) {
			v, err := serde.JSON[json.RawMessage]().Deserialize(topic, b)
			if err != nil {
				return "", err
			}
			var out bytes.Buffer
			if err := json.Compact(&out, v); err != nil {
				return "", err
			}
			return out.String(), nil
		}}, nil
	}
	return decoder{}, fmt.Errorf("unknown serde %q (want one of %s)", name, serdeNames)
}

// render decodes data, or shows it as hex after undecodableMarker; ok is false then.
func (d decoder) render(data []byte) (text string, ok bool) {
	if data == nil {
		data = []byte{} // a stored empty value, not a tombstone: stores hold none
	}
	s, err := d.decode(data)
	if err != nil {
		return undecodableMarker + hex.EncodeToString(data), false
	}
	return s, true
}
