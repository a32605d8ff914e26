package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestSecuredCluster counts the sample text on a broker that requires TLS and
// SCRAM-SHA-256: the application and the command's own clients (topics, input, the
// counts read back) all use the settings.
func TestSecuredCluster(t *testing.T) {
	ca, err := kafkatest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ca.ServerTLS(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := kafkatest.Start(t, kafkatest.KfakeOptions(
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "wordcount", "wc-s3cret"), kfake.TLS(serverTLS),
	))
	sec := eddy.Security{
		TLS:  &eddy.TLS{CAPEM: ca.PEM()},
		SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA256, Username: "wordcount", Password: "wc-s3cret"},
	}
	var out bytes.Buffer
	o := options{brokers: strings.Join(b.Addrs(), ","), security: sec, partitions: 2, stateDir: t.TempDir(), timeout: time.Minute}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, parseOutput(t, out.String()), countIndependently(sampleText))

	// The embedded broker is plaintext: settings without -brokers are a mistake.
	err = run(context.Background(), options{security: sec, partitions: 1, timeout: time.Minute}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-brokers") {
		t.Fatalf("security settings without -brokers: %v, want an error naming -brokers", err)
	}
}
