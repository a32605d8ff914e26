package eddy

import "time"

// Guarantee is the processing guarantee of an application.
type Guarantee int

const (
	// ExactlyOnce (the default): output records, changelog records and consumed offsets
	// of a task are committed together in one Kafka transaction. After any crash the
	// result equals the result without it: nothing lost, nothing counted twice (for
	// readers using read_committed).
	ExactlyOnce Guarantee = iota
	// AtLeastOnce: no transactions; consumed offsets are committed after the output and
	// changelog records are acknowledged. Nothing is lost, but after a crash the records
	// since the last commit are processed again: output can repeat, and stores apply
	// those records twice (a count can be too high).
	AtLeastOnce
)

func (g Guarantee) String() string {
	if g == AtLeastOnce {
		return "at-least-once"
	}
	return "exactly-once"
}

// commitDefaults checks the guarantee and the commit settings and fills in their
// defaults.
func (c *Config) commitDefaults() error {
	switch c.Guarantee {
	case ExactlyOnce, AtLeastOnce:
	default:
		return configErr("Guarantee", "unknown value %d", c.Guarantee)
	}
	interval := 100 * time.Millisecond
	if c.Guarantee == AtLeastOnce {
		interval = time.Second
	}
	if err := defaultDuration("CommitInterval", &c.CommitInterval, interval); err != nil {
		return err
	}
	if c.CommitRecords < 0 {
		return configErr("CommitRecords", "%d is negative", c.CommitRecords)
	}
	if c.CommitRecords == 0 {
		c.CommitRecords = 10000
	}
	if err := defaultDuration("TransactionTimeout", &c.TransactionTimeout, 10*time.Second); err != nil {
		return err
	}
	if c.TransactionTimeout < time.Second {
		return configErr("TransactionTimeout", "%v is below 1s", c.TransactionTimeout)
	}
	// A transaction stays open from its first record to the commit, a commit interval
	// later; the broker aborts one open longer than the transaction timeout, so with the
	// interval at or above the timeout commits fail and are replayed for ever (issue 26:
	// it was accepted silently).
	if c.Guarantee == ExactlyOnce && c.CommitInterval >= c.TransactionTimeout {
		return configErr("CommitInterval", "%v is at or above TransactionTimeout (%v): a transaction stays open for a commit interval and the broker aborts "+
			"one open longer than the transaction timeout, so commits would fail; keep CommitInterval well below TransactionTimeout (defaults: 100 ms and 10 s)",
			c.CommitInterval, c.TransactionTimeout)
	}
	if err := defaultDuration("StoreWriteInterval", &c.StoreWriteInterval, time.Second); err != nil {
		return err
	}
	if err := defaultDuration("TaskTimeout", &c.TaskTimeout, defaultTaskTimeout); err != nil {
		return err
	}
	return defaultDuration("RepartitionPurgeInterval", &c.RepartitionPurgeInterval, 30*time.Second)
}

// defaultTaskTimeout is Config.TaskTimeout's default: Kafka Streams' task.timeout.ms.
const defaultTaskTimeout = 5 * time.Minute

// defaultDuration refuses a negative duration and gives a zero one its default.
func defaultDuration(setting string, d *time.Duration, def time.Duration) error {
	if *d < 0 {
		return configErr(setting, "%v is negative", *d)
	}
	if *d == 0 {
		*d = def
	}
	return nil
}
