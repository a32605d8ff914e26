package eddy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/topology"
)

// testPKI is a CA (kafkatest.CA) made for one test: nothing is committed to the
// repository, nothing outlives the test.
type testPKI struct {
	ca        *kafkatest.CA
	caPEM     []byte
	serverTLS *tls.Config // for the broker's listener: 127.0.0.1 and "localhost"
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := kafkatest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, caPEM: ca.PEM()}
	p.serverTLS = p.serverConfig(t, time.Now().Add(time.Hour))
	return p
}

// serverConfig is a broker's TLS configuration with a certificate valid until notAfter.
func (p *testPKI) serverConfig(t *testing.T, notAfter time.Time) *tls.Config {
	t.Helper()
	c, err := p.ca.ServerTLS(notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issue makes a certificate for 127.0.0.1 and localhost signed by the CA.
func (p *testPKI) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(cn, usage, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

const testSecret = "pa55-W0rd-never-printed"

func secTopology(t *testing.T) *topology.Topology {
	t.Helper()
	topo, err := wordcount.TopologyFor("in", "out")
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestSecurityConfigErrorsNameTheField(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "client", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	badCA := filepath.Join(dir, "notpem.txt")
	if err := os.WriteFile(badCA, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(context.Context) (string, error) { return "tok", nil }
	cases := []struct {
		name string
		sec  eddy.Security
		want string
	}{
		{"no mechanism", eddy.Security{SASL: &eddy.SASL{Username: "u", Password: testSecret}}, "Security.SASL.Mechanism: required"},
		{"unknown mechanism", eddy.Security{SASL: &eddy.SASL{Mechanism: "GSSAPI", Username: "u", Password: testSecret}}, `Security.SASL.Mechanism: "GSSAPI" is not supported`},
		{"scram without user", eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Password: testSecret}}, "Security.SASL.Username: required with SCRAM-SHA-512"},
		{"plain without password", eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLPlain, Username: "u"}}, "Security.SASL.Password: required with PLAIN"},
		{"oauth without token", eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLOAuthBearer}}, "Security.SASL.TokenSource: required with OAUTHBEARER"},
		{"oauth with password", eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLOAuthBearer, TokenSource: token, Password: testSecret}}, "leave Username and Password empty"},
		{"token with scram", eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA256, Username: "u", Password: testSecret, TokenSource: token}}, "Security.SASL.TokenSource: only used with OAUTHBEARER"},
		{"two CAs", eddy.Security{TLS: &eddy.TLS{CAFile: "a.pem", CAPEM: pki.caPEM}}, "Security.TLS.CAFile: set CAFile or CAPEM, not both"},
		{"cert without key", eddy.Security{TLS: &eddy.TLS{CertPEM: cert}}, "Security.TLS: a client certificate needs its private key"},
		{"key without cert", eddy.Security{TLS: &eddy.TLS{KeyPEM: key}}, "Security.TLS: a client certificate needs its private key"},
		{"missing CA file", eddy.Security{TLS: &eddy.TLS{CAFile: filepath.Join(dir, "nope.pem")}}, "Security.TLS.CAFile: open"},
		{"CA file not PEM", eddy.Security{TLS: &eddy.TLS{CAFile: badCA}}, "Security.TLS.CAFile: no PEM certificate found"},
		{"key not matching", eddy.Security{TLS: &eddy.TLS{CertPEM: cert, KeyPEM: pki.issueKeyOnly(t)}}, "Security.TLS: client certificate and key"},
		{"skip verify with CA", eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM, InsecureSkipVerifyCertificates: true}}, "Security.TLS.InsecureSkipVerifyCertificates: the CA and ServerName would be ignored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eddy.New(secTopology(t), eddy.Config{ApplicationID: "a", Brokers: []string{"h:1"}, Security: tc.sec})
			if !errors.Is(err, eddy.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrConfig with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) || bytes.Contains([]byte(err.Error()), key[30:60]) {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

// issueKeyOnly is a private key of no certificate of the test.
func (p *testPKI) issueKeyOnly(t *testing.T) []byte {
	_, key := p.issue(t, "other", x509.ExtKeyUsageClientAuth)
	return key
}

func TestSkipVerifyIsRefusedUnlessExplicit(t *testing.T) {
	hook := func(sc *sarama.Config) {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = &tls.Config{InsecureSkipVerify: true}
	}
	_, err := eddy.New(secTopology(t), eddy.Config{ApplicationID: "a", Brokers: []string{"h:1"}, Sarama: hook})
	if !errors.Is(err, eddy.ErrConfig) || !strings.Contains(err.Error(), "InsecureSkipVerifyCertificates") {
		t.Fatalf("a Sarama hook skipping verification: error %v, want ErrConfig naming InsecureSkipVerifyCertificates", err)
	}
	_, err = eddy.New(secTopology(t), eddy.Config{ApplicationID: "a", Brokers: []string{"h:1"}, Sarama: hook,
		Security: eddy.Security{TLS: &eddy.TLS{InsecureSkipVerifyCertificates: true}}})
	if err != nil {
		t.Fatalf("explicit InsecureSkipVerifyCertificates: %v", err)
	}
}

func TestSecurityAppliesToSarama(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "client", x509.ExtKeyUsageClientAuth)
	sec := eddy.Security{
		TLS:  &eddy.TLS{CAPEM: pki.caPEM, CertPEM: cert, KeyPEM: key, ServerName: "kafka.example"},
		SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "app", Password: testSecret},
	}
	sc := sarama.NewConfig()
	if err := sec.ApplyTo(sc); err != nil {
		t.Fatal(err)
	}
	n := sc.Net
	if !n.TLS.Enable || n.TLS.Config == nil || n.TLS.Config.ServerName != "kafka.example" || len(n.TLS.Config.Certificates) != 1 || n.TLS.Config.RootCAs == nil || n.TLS.Config.InsecureSkipVerify {
		t.Fatalf("TLS not applied: %+v", n.TLS)
	}
	if !n.SASL.Enable || n.SASL.Mechanism != sarama.SASLTypeSCRAMSHA512 || n.SASL.User != "app" || n.SASL.Password != testSecret || n.SASL.SCRAMClientGeneratorFunc == nil {
		t.Fatalf("SASL not applied: mechanism %q user %q", n.SASL.Mechanism, n.SASL.User)
	}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	// OAUTHBEARER: the token source feeds sarama's provider.
	sc = sarama.NewConfig()
	sec = eddy.Security{SASL: &eddy.SASL{Mechanism: eddy.SASLOAuthBearer, TokenSource: func(ctx context.Context) (string, error) {
		if _, ok := ctx.Deadline(); !ok {
			return "", errors.New("no deadline")
		}
		return "the-token", nil
	}}}
	if err := sec.ApplyTo(sc); err != nil {
		t.Fatal(err)
	}
	if sc.Net.SASL.Mechanism != sarama.SASLTypeOAuth || sc.Net.SASL.TokenProvider == nil {
		t.Fatalf("OAUTHBEARER not applied: %q", sc.Net.SASL.Mechanism)
	}
	tok, err := sc.Net.SASL.TokenProvider.Token()
	if err != nil || tok.Token != "the-token" {
		t.Fatalf("token %v, %v", tok, err)
	}
}

// TestSecretsNeverPrinted prints and logs a Config every way a user might and checks
// the password, token and private key appear in none of them.
func TestSecretsNeverPrinted(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "client", x509.ExtKeyUsageClientAuth)
	keyBody := string(key[40:80]) // inside the base64 of the key
	for _, sasl := range []*eddy.SASL{
		{Mechanism: eddy.SASLSCRAMSHA256, Username: "app", Password: testSecret},
		{Mechanism: eddy.SASLOAuthBearer, TokenSource: func(context.Context) (string, error) { return testSecret, nil }},
	} {
		sec := eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM, CertPEM: cert, KeyPEM: key}, SASL: sasl}
		cfg := eddy.Config{ApplicationID: "a", Brokers: []string{"h:1"}, Security: sec}
		app, err := eddy.New(secTopology(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for _, v := range []any{cfg, &cfg, sec, &sec, *sec.TLS, sec.TLS, *sasl, sasl, app.Config()} {
			fmt.Fprintf(&out, "%v\n%+v\n%#v\n%s\n", v, v, v, v)
		}
		for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
			l := slog.New(h)
			l.Info("config", "cfg", cfg, "sec", sec, "tls", sec.TLS, "sasl", sasl, "ptr", &cfg)
		}
		s := out.String()
		if strings.Contains(s, testSecret) || strings.Contains(s, keyBody) {
			t.Fatalf("a secret is printed:\n%s", s)
		}
		for _, want := range []string{"SASL(" + string(sasl.Mechanism), "key redacted"} {
			if !strings.Contains(s, want) {
				t.Fatalf("description lacks %q:\n%s", want, s)
			}
		}
	}
}
