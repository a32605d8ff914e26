package eddy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/securityflags"
	"github.com/eddy-streams/eddy/kafkatest"
)

// SecureBrokersEnv names the SASL_SSL listener of a real Kafka started by
// "EDDY_KAFKA_SECURE=1 integration/kafka.sh start"; its client settings are in the
// EDDY_TLS_* and EDDY_SASL_* variables that "integration/kafka.sh secure-env" prints.
const secureBrokersEnv = "EDDY_SECURE_BROKERS"

// secureEnv reads the secured listener's settings: test.sh exports them as
// EDDY_TEST_SECURE_<name without EDDY_> (so that the CLI's own tests, which read the
// EDDY_TLS_* and EDDY_SASL_* variables, are not given them); by hand, the plain names of
// "integration/kafka.sh secure-env" work too.
func secureEnv(name string) string {
	if v := os.Getenv("EDDY_TEST_SECURE_" + strings.TrimPrefix(name, "EDDY_")); v != "" {
		return v
	}
	return os.Getenv(name)
}

// TestSecuredKafka runs on real Kafka with a SASL_SSL listener, SCRAM and the
// StandardAuthorizer: the word count exactly-once, then a wrong password and an
// unknown CA, each of which must stop Run fast with an error naming the cause.
func TestSecuredKafka(t *testing.T) {
	getenv := secureEnv
	addrs := getenv(secureBrokersEnv)
	if addrs == "" {
		if os.Getenv("CI") != "" {
			// CI runs test.sh, which starts the broker with the secured listener: this
			// test is never skipped there.
			t.Fatalf("%s is not set in CI: test.sh starts the broker with EDDY_KAFKA_SECURE=1 and exports it", secureBrokersEnv)
		}
		t.Skipf("%s is not set: no secured Kafka (EDDY_KAFKA_SECURE=1 integration/kafka.sh start; eval \"$(EDDY_KAFKA_SECURE=1 integration/kafka.sh secure-env)\")", secureBrokersEnv)
	}
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	sec, err := securityflags.Register(fs).Security(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if sec.TLS == nil || sec.SASL == nil {
		t.Fatalf("%s is set but the TLS and SASL variables are not (%v)", secureBrokersEnv, sec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kafkatest.DialWith(ctx, "kafka-secured", strings.Split(addrs, ","), sec.ApplyTo)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("word count exactly-once", func(t *testing.T) {
		e := newWordCount(t, c, 3)
		e.produce(t, 300)
		cfg := e.config(t)
		cfg.Security = sec
		in := start(t, e.topo, cfg)
		waitFor(t, 2*time.Minute, "the counts", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			return e.complete(t), nil
		})
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.checkExactlyOnce(t)
	})

	failing := func(t *testing.T, bad eddy.Security) (error, time.Duration) {
		e := newWordCount(t, c, 1)
		cfg := e.config(t)
		cfg.Security = bad
		app, err := eddy.New(e.topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		began := time.Now()
		err = app.Run(ctx)
		t.Logf("Run after %v: %v", time.Since(began), err)
		return err, time.Since(began)
	}
	t.Run("wrong password", func(t *testing.T) {
		bad := sec
		bad.SASL = &eddy.SASL{Mechanism: sec.SASL.Mechanism, Username: sec.SASL.Username, Password: "wrong-" + testSecret}
		err, took := failing(t, bad)
		if err == nil || took > failFast || !errors.Is(err, eddy.ErrNotAuthorized) || !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Fatalf("Run: %v after %v, want eddy.ErrNotAuthorized and sarama.ErrSASLAuthenticationFailed within %v", err, took, failFast)
		}
		if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), sec.SASL.Password) {
			t.Fatalf("error %q shows a password", err)
		}
	})
	t.Run("unknown CA", func(t *testing.T) {
		other := newTestPKI(t)
		bad := sec
		bad.TLS = &eddy.TLS{CAPEM: other.caPEM}
		err, took := failing(t, bad)
		if err == nil || took > failFast || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
			t.Fatalf("Run: %v after %v, want a certificate error within %v", err, took, failFast)
		}
	})
}
