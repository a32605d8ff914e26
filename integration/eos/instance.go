//go:build unix

package eos

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/processor"
)

// InstanceEnv is the environment variable that turns a process into an instance of the
// test application: it holds the InstanceConfig as JSON. The harness re-executes its
// own binary (the eos-verify command, or the test binary) with it set.
const InstanceEnv = "EDDY_EOS_INSTANCE"

// RestoreLogMsg is the message of the log line an instance writes for every store
// restore (eddy.Config.OnRestore); the harness parses these lines.
const RestoreLogMsg = "eos-restore"

// InstanceConfig configures one instance process.
type InstanceConfig struct {
	Name           string        `json:"name"`
	Names          Names         `json:"names"`
	Buckets        int           `json:"buckets"`
	Windows        WindowParams  `json:"windows"`
	Finals         bool          `json:"finals,omitempty"`
	Join           JoinParams    `json:"join"`
	Brokers        []string      `json:"brokers"`
	StateDir       string        `json:"state_dir"`
	CommitInterval time.Duration `json:"commit_interval"`
	AtLeastOnce    bool          `json:"at_least_once,omitempty"`
	SessionTimeout time.Duration `json:"session_timeout,omitempty"`
	// TransactionTimeout of the application; 0: eddy's default.
	TransactionTimeout time.Duration `json:"transaction_timeout,omitempty"`
	// ReplicationFactor of the internal topics; 0: eddy's default.
	ReplicationFactor int16 `json:"replication_factor,omitempty"`
	// InternalTopicConfigs of the internal topics; none: eddy's default.
	InternalTopicConfigs map[string]string `json:"internal_topic_configs,omitempty"`
	// Standbys is the application's eddy.Config.NumStandbyReplicas.
	Standbys int `json:"standbys,omitempty"`
	// InstanceID is the application's eddy.Config.InstanceID (static membership:
	// group.instance.id); empty: a dynamic member.
	InstanceID string `json:"instance_id,omitempty"`
	// Cooperative: eddy.Config.RebalanceProtocol is CooperativeRebalancing.
	Cooperative bool `json:"cooperative,omitempty"`
	// OverlapCommits is eddy.Config.OverlapCommits.
	OverlapCommits bool `json:"overlap_commits,omitempty"`
	Debug          bool `json:"debug,omitempty"`
	// StallFile, when set, makes the instance stop itself (SIGSTOP) inside a commit
	// while the file exists: the first time one of its producers sends AddOffsetsToTxn,
	// it deletes the file and stops. The transaction's records (output, changelog,
	// offsets record) are written then, its offsets not yet committed: the MoveTwice
	// fault.
	StallFile string `json:"stall_file,omitempty"`
	// Postgres, when set, adds the PostgreSQL target (pg.go): the sink nodes of the
	// two-phase and upsert modes, and the write-ahead mode's pipes, run alongside.
	Postgres *InstancePostgres `json:"postgres,omitempty"`
}

// IsInstance reports whether this process was started as an instance.
func IsInstance() bool { return os.Getenv(InstanceEnv) != "" }

// InstanceMain runs this process as an instance (see InstanceEnv) until SIGTERM or
// SIGINT, and returns the exit status: 0 after a clean stop, 1 when the application
// failed, 2 for a bad configuration. Logs go to stderr as JSON lines.
func InstanceMain() int {
	var cfg InstanceConfig
	if err := json.Unmarshal([]byte(os.Getenv(InstanceEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "eos instance: bad %s: %v\n", InstanceEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := RunInstance(ctx, cfg, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "eos instance %s: %v\n", cfg.Name, err)
		if errors.Is(err, eddy.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// RunInstance runs the test application until ctx ends, logging to w (JSON lines),
// including one RestoreLogMsg line per store restore.
func RunInstance(ctx context.Context, cfg InstanceConfig, w io.Writer) error {
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("instance", cfg.Name)
	var err error
	var pg *PGTargets
	var pool *pgxpool.Pool
	if cfg.Postgres != nil {
		if pool, pg, err = connectPostgres(ctx, cfg.Postgres, logger); err != nil {
			return err
		}
		defer pool.Close()
		armSinkFaults(cfg.Postgres.SinkFaultFile, logger)
	}
	topo, err := Topology(cfg.Names, cfg.Buckets, cfg.Windows, cfg.Finals, cfg.Join, pg)
	if err != nil {
		return err
	}
	ec := eddy.Config{
		ApplicationID:        cfg.Names.App,
		Brokers:              cfg.Brokers,
		StateDir:             cfg.StateDir,
		CommitInterval:       cfg.CommitInterval,
		TransactionTimeout:   cfg.TransactionTimeout,
		ReplicationFactor:    cfg.ReplicationFactor,
		InternalTopicConfigs: cfg.InternalTopicConfigs,
		NumStandbyReplicas:   cfg.Standbys,
		InstanceID:           cfg.InstanceID,
		// Purge the repartition topic often, so that faults land around purges: a purge
		// that deleted unprocessed records would show as lost bucket counts.
		RepartitionPurgeInterval: time.Second,
		Logger:                   logger,
		OnRestore: func(task processor.TaskID, r changelog.Result) {
			logger.Info(RestoreLogMsg, "task", task.String(), "store", r.Store, "from", r.From, "to", r.To,
				"records", r.Records, "wiped", r.Wiped, "took", r.Duration)
		},
	}
	if cfg.Cooperative {
		ec.RebalanceProtocol = eddy.CooperativeRebalancing
	}
	ec.OverlapCommits = cfg.OverlapCommits
	if cfg.AtLeastOnce {
		ec.Guarantee = eddy.AtLeastOnce
	}
	ec.Sarama = func(c *sarama.Config) {
		// The harness tells a dead process's group member by its client ID.
		c.ClientID = ClientID(cfg.Name)
		if s := cfg.SessionTimeout; s > 0 {
			c.Consumer.Group.Session.Timeout = s
			c.Consumer.Group.Heartbeat.Interval = s / 5
		}
		if cfg.StallFile != "" {
			c.Net.Proxy.Enable = true
			c.Net.Proxy.Dialer = &stallDialer{file: cfg.StallFile, d: net.Dialer{Timeout: c.Net.DialTimeout, KeepAlive: c.Net.KeepAlive}}
		}
	}
	app, err := eddy.New(topo, ec)
	if err != nil {
		return err
	}
	logger.Info("eos instance starting", "pid", os.Getpid(), "commit_interval", cfg.CommitInterval, "guarantee", ec.Guarantee.String())
	if pool != nil {
		// The write-ahead mode's pipes run beside the application, in the same process
		// (the faults hit both); either failing ends both.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		pipes := make(chan error, 1)
		go func() {
			err := runPipes(ctx, cfg, pool, logger)
			cancel()
			pipes <- err
		}()
		err := app.Run(ctx)
		cancel()
		if perr := <-pipes; perr != nil {
			return fmt.Errorf("pipes: %w", perr)
		}
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		logger.Info("eos instance stopped")
		return nil
	}
	if err := app.Run(ctx); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	logger.Info("eos instance stopped")
	return nil
}

// ClientID is the Kafka client ID of the instance process named name ("i1#4" →
// "eos-i1-4"): the group members of a process carry it.
func ClientID(name string) string { return "eos-" + strings.ReplaceAll(name, "#", "-") }

// RestoreEvent is one restore an instance reported.
type RestoreEvent struct {
	Task    string
	Store   string
	From    int64
	To      int64
	Records int64
	Wiped   bool
}

// parseOperatorStartLine returns the input partition and offset an OperatorStartMsg
// line reports.
func parseOperatorStartLine(line []byte) (partition int32, offset int64, ok bool) {
	if !bytes.Contains(line, []byte(OperatorStartMsg)) {
		return 0, 0, false
	}
	var l struct {
		Msg       string `json:"msg"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	}
	if err := json.Unmarshal(line, &l); err != nil || l.Msg != OperatorStartMsg {
		return 0, 0, false
	}
	return l.Partition, l.Offset, true
}

// parseRestoreLine returns the restore a log line reports, if it is a RestoreLogMsg line.
func parseRestoreLine(line []byte) (RestoreEvent, bool) {
	var l struct {
		Msg     string `json:"msg"`
		Task    string `json:"task"`
		Store   string `json:"store"`
		From    int64  `json:"from"`
		To      int64  `json:"to"`
		Records int64  `json:"records"`
		Wiped   bool   `json:"wiped"`
	}
	if err := json.Unmarshal(line, &l); err != nil || l.Msg != RestoreLogMsg {
		return RestoreEvent{}, false
	}
	return RestoreEvent{Task: l.Task, Store: l.Store, From: l.From, To: l.To, Records: l.Records, Wiped: l.Wiped}, true
}

// stallDialer dials the brokers for an instance with a StallFile: its connections stop
// the process inside a commit (stallConn).
type stallDialer struct {
	file string
	d    net.Dialer
}

func (s *stallDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := s.d.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, file: s.file}, nil
}

// apiAddOffsetsToTxn is the Kafka API key of AddOffsetsToTxn, which sarama sends when a
// transaction commits, after its records are written and before TxnOffsetCommit and
// EndTxn.
const apiAddOffsetsToTxn = 25

// stallConn stops the process before it writes an AddOffsetsToTxn request while the
// stall file exists (deleting it: once per file). sarama writes each request in one
// Write (int32 size, int16 API key, ...) on a plaintext connection.
type stallConn struct {
	net.Conn
	file string
}

func (c *stallConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == apiAddOffsetsToTxn && os.Remove(c.file) == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
	return c.Conn.Write(b)
}
