//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
)

// The parent's view of the broker: end offsets and committed offsets, polled cheaply
// over one long-lived client while a child runs.

// endOffsets returns the end offset of every partition of topic: the high-water mark
// (ReadUncommitted) or the last stable offset (ReadCommitted). A topic that does not
// exist (yet) has no partitions.
func (e *env) endOffsets(topic string, iso sarama.IsolationLevel) ([]int64, error) {
	parts, err := e.client.Partitions(topic)
	if err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil, nil
		}
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	out := make([]int64, len(parts))
	byLeader := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, p := range parts {
		b, err := e.client.Leader(topic, p)
		if err != nil {
			return nil, fmt.Errorf("leader of %s/%d: %w", topic, p, err)
		}
		req := byLeader[b]
		if req == nil {
			req = sarama.NewOffsetRequest(e.client.Config().Version)
			req.IsolationLevel = iso
			byLeader[b] = req
		}
		req.AddBlock(topic, p, sarama.OffsetNewest, 1)
	}
	for b, req := range byLeader {
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
		}
		for _, p := range parts {
			blk := resp.GetBlock(topic, p)
			if blk == nil {
				continue
			}
			if !errors.Is(blk.Err, sarama.ErrNoError) {
				return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, p, blk.Err)
			}
			out[p] = blk.Offset
		}
	}
	return out, nil
}

// countCommitted counts the committed data records of a topic (read_committed, up to
// each partition's last stable offset).
func (e *env) countCommitted(ctx context.Context, topic string) (int64, error) {
	lso, err := e.endOffsets(topic, sarama.ReadCommitted)
	if err != nil {
		return 0, err
	}
	var n int64
	for p, end := range lso {
		err := kread.ReadRange(ctx, e.client, topic, int32(p), 0, end, func(kread.Record) error {
			n++
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("count the records of %s/%d: %w", topic, p, err)
		}
	}
	return n, nil
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// committed returns the group's committed offsets of topic's partitions (-1: none),
// asked as a read_committed consumer asks (RequireStable): stable is false while a
// transaction with offsets of the group is being completed.
func (e *env) committed(group, topic string, partitions int32) (offs []int64, stable bool, err error) {
	coord, err := e.client.Coordinator(group)
	if err != nil {
		_ = e.client.RefreshCoordinator(group)
		return nil, false, fmt.Errorf("coordinator of %s: %w", group, err)
	}
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	req := sarama.NewOffsetFetchRequest(e.client.Config().Version, group, map[string][]int32{topic: ps})
	req.RequireStable = true
	resp, err := coord.FetchOffset(req)
	if err != nil {
		_ = e.client.RefreshCoordinator(group)
		return nil, false, fmt.Errorf("offset fetch of %s: %w", group, err)
	}
	top := resp.Err
	if resp.Version >= 8 && len(resp.Groups) > 0 {
		top = resp.Groups[0].Err
	}
	if !errors.Is(top, sarama.ErrNoError) {
		if errors.Is(top, sarama.ErrUnstableOffsetCommit) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("offset fetch of %s: %w", group, top)
	}
	offs = make([]int64, partitions)
	for _, p := range ps {
		b := resp.GetBlock(topic, p)
		switch {
		case b == nil:
			return nil, false, fmt.Errorf("offset fetch of %s: no block for %s/%d", group, topic, p)
		case errors.Is(b.Err, sarama.ErrUnstableOffsetCommit):
			return nil, false, nil
		case !errors.Is(b.Err, sarama.ErrNoError):
			return nil, false, fmt.Errorf("offset fetch of %s %s/%d: %w", group, topic, p, b.Err)
		}
		offs[p] = b.Offset
	}
	return offs, true, nil
}

// groupEmpty reports whether the group has no members (a SIGKILLed member is gone once
// its session timed out).
func (e *env) groupEmpty(group string) (bool, error) {
	gs, err := e.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return false, fmt.Errorf("describe group %s: %w", group, err)
	}
	if len(gs) != 1 {
		return false, fmt.Errorf("describe group %s: %d answers", group, len(gs))
	}
	return len(gs[0].Members) == 0, nil
}

// waitGroupEmpty waits until the group has no members.
func (e *env) waitGroupEmpty(ctx context.Context, group string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := e.groupEmpty(group)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("group %s still has members after %v", group, timeout), err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// createTopic creates a topic (8 partitions by default) and records it for deletion.
func (e *env) createTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	if err := e.cluster.CreateTopic(ctx, name, partitions, configs); err != nil {
		// kafkatest waits ~5 s for the leaders to serve a new topic; on a busy broker a
		// topic of hundreds of partitions (the cost rows) can take longer. Once it exists
		// with all its partitions, wait for that here.
		if werr := e.waitServed(ctx, name, partitions); werr != nil {
			return fmt.Errorf("create topic %s: %w", name, errors.Join(err, werr))
		}
	}
	e.created = append(e.created, name)
	// Let the parent's client learn the new topic now rather than at its first poll.
	_ = e.client.RefreshMetadata(name)
	return nil
}

// waitServed waits up to a minute until a topic exists with all its partitions and
// answers ListOffsets on every one.
func (e *env) waitServed(ctx context.Context, name string, partitions int32) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_ = e.client.RefreshMetadata(name)
		offs, err := e.endOffsets(name, sarama.ReadUncommitted)
		if err == nil && int32(len(offs)) == partitions {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d of %d partitions in the metadata", len(offs), partitions)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s not served after a minute: %w", name, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// deleteTopicsWithPrefix deletes the topics whose names start with prefix (a run's own
// topics and the internal topics of its application).
func (e *env) deleteTopicsWithPrefix(prefix string) error {
	topics, err := e.admin.ListTopics()
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	var errs []error
	for name := range topics {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			if err := e.admin.DeleteTopic(name); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("delete topic %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}
