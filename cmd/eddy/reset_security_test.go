package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestResetOverTLSAndSASL resets an application on a broker that requires TLS and
// SCRAM, the settings coming from flags and environment variables as an operator
// gives them.
func TestResetOverTLSAndSASL(t *testing.T) {
	const password = "reset-s3cret"
	ca, err := kafkatest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ca.ServerTLS(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := eddy.Security{
		TLS:  &eddy.TLS{CAFile: caFile},
		SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "admin", Password: password},
	}
	c := kafkatest.Embedded(t, kafkatest.KfakeOptions(
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", password), kfake.TLS(serverTLS),
	)).WithSarama(sec.ApplyTo)
	e := newResetEnv(t, c)
	e.security = sec
	in := e.start()
	e.waitOutput(in, 1)
	in.stop(t)
	if before := e.committedInput(); fmt.Sprint(before) != "map[0:4 1:3]" {
		t.Fatalf("committed input offsets after the run: %v, want every line", before)
	}

	// Without the password, reset stops at once and says what is missing.
	t.Setenv("EDDY_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("EDDY_TLS_CA_FILE", caFile)
	_, err = e.reset("--sasl-username", "admin")
	if err == nil || !strings.Contains(err.Error(), "EDDY_SASL_PASSWORD") {
		t.Fatalf("reset without a password: %v, want an error naming EDDY_SASL_PASSWORD", err)
	}

	t.Setenv("EDDY_SASL_PASSWORD", password)
	out, err := e.reset("--sasl-username", "admin")
	if err != nil {
		t.Fatalf("reset over TLS and SCRAM: %v\n%s", err, out)
	}
	if !strings.Contains(out, e.changelog()) {
		t.Errorf("reset output does not name the changelog %s:\n%s", e.changelog(), out)
	}
	if after := e.committedInput(); fmt.Sprint(after) != "map[0:0 1:0]" {
		t.Errorf("offsets after reset: %v, want the earliest, map[0:0 1:0]", after)
	}
}
