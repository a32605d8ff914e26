package kstreams

import (
	"context"
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/topology"
)

// Compare runs c.Input through Kafka Streams' topology c.Topology (in the oracle) and
// through topo (eddy's version of it, in topologytest) and compares their output topics. It
// returns "" when they are equal; otherwise a report of the differences (see Diff) and
// of the input shrunk (see Shrink) to a few records that still
// differ (c.ShrinkBudget). An error means the oracle could not run the case.
func (o *Oracle) Compare(ctx context.Context, c Case, topo *topology.Topology) (string, error) {
	name, input := c.Topology, c.Input
	outputs, ok := Outputs[name]
	if !ok {
		return "", fmt.Errorf("kstreams: unknown topology %q", name)
	}
	var oracleErr error
	restartAt := -1
	if c.RestartAt > 0 {
		restartAt = c.RestartAt
	}
	differs := func(in []Record) string {
		want, err := o.RunCase(ctx, Case{Topology: name, Input: in, Config: c.Config})
		if err != nil {
			oracleErr = err
			return ""
		}
		got, err := RunTopologyTestRestart(topo, "oracle-"+name, in, outputs, min(restartAt, len(in)))
		if err != nil {
			return "eddy failed: " + err.Error() + "\n"
		}
		for topic := range want {
			if perKeyChangelogs[topic] {
				want[topic], got[topic] = ByKey(want[topic]), ByKey(got[topic])
			} else if strings.HasSuffix(topic, "-changelog") {
				want[topic] = CompactChangelog(topic, want[topic], false)
				got[topic] = CompactChangelog(topic, got[topic], true)
			}
		}
		return Diff(want, got)
	}
	report := differs(input)
	if oracleErr != nil || report == "" {
		return "", oracleErr
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: eddy's output differs from Kafka Streams' (config %v) on %d input records:\n%s", name, c.Config, len(input), report)
	budget := c.ShrinkBudget
	if budget == 0 {
		budget = 300
	}
	if budget < 0 {
		return sb.String(), nil
	}
	small := Shrink(input, budget, func(in []Record) bool { return oracleErr == nil && differs(in) != "" })
	if oracleErr != nil {
		return "", oracleErr
	}
	fmt.Fprintf(&sb, "the input shrunk to %d records that still differ:\n", len(small))
	for _, r := range small {
		fmt.Fprintf(&sb, "  %s\n", r)
	}
	sb.WriteString(differs(small))
	return sb.String(), oracleErr
}
