package eddy

// RebalanceProtocol is how the consumer group moves tasks between instances
// (Config.RebalanceProtocol).
type RebalanceProtocol int

const (
	// EagerRebalancing (the default): at every rebalance every instance commits and
	// suspends all its tasks, the group joins again, and each instance resumes the
	// tasks it keeps (without a restore). Every task of the group pauses for the
	// rebalance, typically 0.15-0.6 s (BENCHMARKS.md, "Availability").
	EagerRebalancing RebalanceProtocol = iota
	// CooperativeRebalancing (KIP-429, incremental): only the tasks that move stop. A
	// task moves in two rebalances: in the first its old owner commits its open
	// transaction and lets it go, in the follow-up the new owner gets it; the
	// instance's other tasks go on processing throughout, except those run by the same
	// worker as a task that arrives or leaves, which pause for one commit. Every
	// instance of an application must use the same protocol: switching a running
	// application takes two rolling restarts (docs/operations.md, "Cooperative
	// rebalancing").
	CooperativeRebalancing
)

func (p RebalanceProtocol) String() string {
	switch p {
	case EagerRebalancing:
		return "eager"
	case CooperativeRebalancing:
		return "cooperative"
	}
	return "unknown"
}

// checkRebalanceProtocol refuses a value that is not one of the protocols.
func (c *Config) checkRebalanceProtocol() error {
	switch c.RebalanceProtocol {
	case EagerRebalancing, CooperativeRebalancing:
		return nil
	}
	return configErr("RebalanceProtocol", "unknown value %d: want EagerRebalancing or CooperativeRebalancing", c.RebalanceProtocol)
}
