package eddy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// securedBroker starts an embedded broker with a TLS listener (certificate signed by
// pki's CA) that requires SASL, with the superuser admin/adminPassword for each SCRAM
// mechanism and PLAIN.
func securedBroker(t *testing.T, pki *testPKI) *kafkatest.Cluster {
	t.Helper()
	return kafkatest.Embedded(t, kafkatest.KfakeOptions(
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", adminPassword),
		kfake.Superuser("SCRAM-SHA-256", "admin", adminPassword),
		kfake.Superuser("SCRAM-SHA-512", "admin", adminPassword),
		kfake.TLS(pki.serverTLS),
	))
}

const adminPassword = "admin-" + testSecret

func TestWordCountExactlyOnceOverTLSAndSASL(t *testing.T) {
	pki := newTestPKI(t)
	for _, mech := range []eddy.SASLMechanism{eddy.SASLSCRAMSHA512, eddy.SASLSCRAMSHA256, eddy.SASLPlain} {
		t.Run(string(mech), func(t *testing.T) {
			sec := eddy.Security{
				TLS:  &eddy.TLS{CAPEM: pki.caPEM},
				SASL: &eddy.SASL{Mechanism: mech, Username: "admin", Password: adminPassword},
			}
			c := securedBroker(t, pki).WithSarama(sec.ApplyTo)
			e := newWordCount(t, c, 3)
			e.produce(t, 200)
			cfg := e.config(t)
			cfg.Security = sec
			// Everything eddy says, logs at debug level and metrics, is kept to look
			// for the password in.
			var logs lockedBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg.Metrics = prometheus.NewRegistry()
			in := start(t, e.topo, cfg)
			e.waitCountsWhileRunning(t, in, time.Minute, "the counts")
			srv := httptest.NewServer(in.app.Handler())
			defer srv.Close()
			var served strings.Builder
			for _, path := range []string{"/topology", "/metrics", "/healthz", "/readyz"} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				fmt.Fprintf(&served, "%s %d\n%s\n", path, resp.StatusCode, body)
			}
			if err := in.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			e.checkExactlyOnce(t)
			if !strings.Contains(served.String(), "eddy_") || logs.Len() == 0 {
				t.Fatalf("no metrics served or no logs written: nothing checked\n%s", served.String())
			}
			for what, text := range map[string]string{"the HTTP handler": served.String(), "the logs": logs.String(), "Describe": e.topo.Describe()} {
				if strings.Contains(text, adminPassword) {
					t.Errorf("%s show the password", what)
				}
			}
		})
	}
}

// runFailing runs an App with sec against the secured broker and returns Run's error
// and how long it took.
func runFailing(t *testing.T, c *kafkatest.Cluster, sec eddy.Security) (error, time.Duration) {
	t.Helper()
	e := newWordCount(t, c, 1)
	cfg := e.config(t)
	cfg.Security = sec
	app, err := eddy.New(e.topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	err = app.Run(ctx)
	return err, time.Since(began)
}

// failFast is how long a refused connection may take to stop Run: a bound on the
// retries, far below the minute a hang or a retry loop would take.
const failFast = 10 * time.Second

// answerAuthFailureLikeKafka makes the embedded broker answer a PLAIN authentication
// with a wrong password as Kafka does, with the error code SASL_AUTHENTICATION_FAILED
// and Kafka's message, where kfake closes the connection without an answer.
func answerAuthFailureLikeKafka(c *kafkatest.Cluster) {
	k := c.Broker().Kfake()
	k.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		parts := strings.Split(string(r.SASLAuthBytes), "\x00")
		if len(parts) != 3 || parts[2] == adminPassword {
			return nil, nil, false // not PLAIN, or the right password: kfake goes on
		}
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: Invalid username or password" // Kafka's PlainServerCallbackHandler
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

func TestWrongPasswordFailsFast(t *testing.T) {
	pki := newTestPKI(t)
	for _, mech := range []eddy.SASLMechanism{eddy.SASLPlain, eddy.SASLSCRAMSHA512} {
		t.Run(string(mech), func(t *testing.T) {
			good := eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM}, SASL: &eddy.SASL{Mechanism: mech, Username: "admin", Password: adminPassword}}
			c := securedBroker(t, pki).WithSarama(good.ApplyTo)
			answerAuthFailureLikeKafka(c)
			bad := good
			bad.SASL = &eddy.SASL{Mechanism: mech, Username: "admin", Password: "wrong-" + testSecret}
			err, took := runFailing(t, c, bad)
			t.Logf("Run after %v: %v", took, err)
			if err == nil || took > failFast {
				t.Fatalf("Run returned %v after %v, want an authentication error within %v", err, took, failFast)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Fatalf("error %q shows the password", err)
			}
			// kfake closes the connection on a failed SCRAM exchange without an answer
			// (Kafka answers SASL_AUTHENTICATION_FAILED), so only PLAIN, answered as
			// Kafka does, can show the cause here.
			if mech == eddy.SASLPlain && (!errors.Is(err, sarama.ErrSASLAuthenticationFailed) || !errors.Is(err, eddy.ErrNotAuthorized) ||
				!strings.Contains(err.Error(), "Invalid username or password") || !strings.Contains(err.Error(), "check Security.SASL")) {
				t.Fatalf("error %q: want it to name the authentication failure (sarama.ErrSASLAuthenticationFailed) and the broker's reason", err)
			}
		})
	}
}

func TestCertificateProblemsFailFast(t *testing.T) {
	pki := newTestPKI(t)
	sasl := &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "admin", Password: adminPassword}
	good := eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM}, SASL: sasl}
	expired := *pki
	expired.serverTLS = pki.serverConfig(t, time.Now().Add(-time.Hour))
	other := newTestPKI(t) // a CA that did not sign the broker's certificate
	cases := []struct {
		name   string
		broker *testPKI
		client eddy.Security
		want   string
	}{
		{"unknown CA", pki, eddy.Security{TLS: &eddy.TLS{CAPEM: other.caPEM}, SASL: sasl}, "x509: certificate signed by unknown authority"},
		{"expired certificate", &expired, good, "x509: certificate has expired"},
		{"wrong server name", pki, eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM, ServerName: "kafka.example"}, SASL: sasl}, "certificate is valid for localhost, not kafka.example"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := securedBroker(t, tc.broker).WithSarama(eddy.Security{SASL: sasl, TLS: &eddy.TLS{InsecureSkipVerifyCertificates: true}}.ApplyTo)
			err, took := runFailing(t, c, tc.client)
			t.Logf("Run after %v: %v", took, err)
			if err == nil || took > failFast {
				t.Fatalf("Run returned %v after %v, want a certificate error within %v", err, took, failFast)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want it to name the certificate problem (%q)", err, tc.want)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// A broker that checks client certificates refuses one that expired in the TLS
// handshake, and tells the client no more than a TLS alert ("bad certificate" from Go,
// "unknown certificate" from Kafka's JSSE): Run stops fast with an error that says the
// broker refused the client certificate, and why it would (it expired, and when).
func TestRefusedClientCertificateIsNamed(t *testing.T) {
	pki := newTestPKI(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	checking := *pki
	checking.serverTLS = pki.serverTLS.Clone()
	checking.serverTLS.ClientAuth = tls.VerifyClientCertIfGiven
	checking.serverTLS.ClientCAs = pool
	sasl := &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "admin", Password: adminPassword}
	expiredCert, expiredKey, err := pki.ca.Issue("eddy-client", x509.ExtKeyUsageClientAuth, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other := newTestPKI(t)
	strangerCert, strangerKey := other.issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	cases := []struct {
		name       string
		cert, key  []byte
		want, also string
	}{
		{"expired", expiredCert, expiredKey, "the broker refused the client certificate", "CN=eddy-client expired at"},
		{"signed by another CA", strangerCert, strangerKey, "the broker refused the client certificate", "that the broker trusts the CA"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := securedBroker(t, &checking).WithSarama(eddy.Security{SASL: sasl, TLS: &eddy.TLS{InsecureSkipVerifyCertificates: true}}.ApplyTo)
			err, took := runFailing(t, c, eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM, CertPEM: tc.cert, KeyPEM: tc.key}, SASL: sasl})
			t.Logf("Run after %v: %v", took, err)
			if err == nil || took > failFast {
				t.Fatalf("Run returned %v after %v, want a refusal within %v", err, took, failFast)
			}
			if !errors.Is(err, eddy.ErrNotAuthorized) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.also) {
				t.Fatalf("error %q: want eddy.ErrNotAuthorized, %q and %q", err, tc.want, tc.also)
			}
		})
	}
}
