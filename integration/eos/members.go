//go:build unix

package eos

import (
	"errors"
	"time"

	"github.com/IBM/sarama"
)

// deadMemberGrace is how long past its session timeout the member of a dead process
// may stay in the group before the harness removes it (removeDeadMembers).
const deadMemberGrace = 10 * time.Second

// removeDeadMembers works around a bug of the embedded broker (kfake): a member whose
// process died while its JoinGroup was pending can stay in the group for good, with its
// share of the partitions, which then nobody processes. kfake starts a member's session
// timer only when its join response is handed to the connection, and for a connection
// that has closed that fails about half the time (clientReq.reply selects between a
// buffered channel and the connection's end); Kafka schedules every member's expiry
// when a join completes, delivered or not. (Seen in a clean-clone CI run: an instance
// killed 3 s after its restart, mid-join; two input partitions stalled until the
// harness gave up, 3 min later.)
//
// A member whose client ID is that of a process of this run which ended more than its
// session timeout plus deadMemberGrace ago is removed with a LeaveGroup, logged and
// counted in Result.DeadMembersRemoved. A real broker has expired such a member long
// before, so there the count stays 0 (the tests check that).
func (h *harness) removeDeadMembers() {
	if h.brokerDown || time.Since(h.membersChecked) < 2*time.Second {
		return
	}
	h.membersChecked = time.Now()
	ended := map[string]time.Time{} // client ID → when its process ended
	for _, in := range h.instances {
		for _, p := range in.processes() {
			if p.exited() {
				ended[ClientID(p.name)] = p.endedAt
				ended[pipeClientID(p.name)] = p.endedAt // the PostgreSQL target's pipes
			}
		}
	}
	if len(ended) == 0 {
		return
	}
	if h.membersClient == nil {
		c, err := newClient(h.cfg.Brokers)
		if err != nil {
			h.logger.Debug("eos: group members", "error", err)
			return
		}
		h.membersClient = c
	}
	client := h.membersClient
	// Not closed: closing a ClusterAdmin closes its client, which the harness keeps.
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		h.logger.Debug("eos: group members", "error", err)
		return
	}
	names := []string{h.names.App}
	if h.pg != nil {
		for store := range pipeTopics(h.names) {
			names = append(names, pipeApp(h.names, store))
		}
	}
	groups, err := admin.DescribeConsumerGroups(names)
	if err != nil || len(groups) != len(names) {
		h.logger.Debug("eos: group members", "error", err)
		return
	}
	for _, g := range groups {
		h.removeDeadMembersOf(client, g, ended)
	}
}

func (h *harness) removeDeadMembersOf(client sarama.Client, group *sarama.GroupDescription, ended map[string]time.Time) {
	for id, m := range group.Members {
		// A static member replaced by a restart keeps the client ID of the process that
		// joined first (Kafka 4.1 copies the old member's client ID into the
		// replacement's): judged by it, the live replacement looked dead, and the harness
		// removed it (18 times in seven runs on real Kafka with Static, each a
		// rebalance). A static member's end is its session's or its replacement's.
		if m.GroupInstanceId != nil && *m.GroupInstanceId != "" {
			continue
		}
		at, ok := ended[m.ClientId]
		if !ok || time.Since(at) < h.cfg.SessionTimeout+deadMemberGrace {
			continue
		}
		coordinator, err := client.Coordinator(group.GroupId)
		if err != nil {
			h.logger.Debug("eos: group coordinator", "error", err)
			return
		}
		resp, err := coordinator.LeaveGroup(&sarama.LeaveGroupRequest{GroupId: group.GroupId, MemberId: id})
		if err == nil && !errors.Is(resp.Err, sarama.ErrNoError) {
			err = resp.Err
		}
		if err != nil {
			h.logger.Warn("eos: removing a dead process's group member", "member", id, "error", err)
			continue
		}
		h.res.DeadMembersRemoved++
		h.logger.Warn("eos: the broker kept the group member of a process that ended long ago; removed it (a kfake bug: see removeDeadMembers)",
			"group", group.GroupId, "member", id, "client_id", m.ClientId, "ended_ago", time.Since(at).Round(time.Millisecond), "group_state", group.State)
	}
}
