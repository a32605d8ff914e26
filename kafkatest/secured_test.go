package kafkatest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestDialWithSecuredBroker dials an embedded broker with TLS and SCRAM: with the
// right settings the helpers work; an untrusted certificate ends the dial at once
// instead of retrying until the context ends.
func TestDialWithSecuredBroker(t *testing.T) {
	ca, err := kafkatest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ca.ServerTLS(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := kafkatest.Start(t, kafkatest.KfakeOptions(kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "u", "p"), kfake.TLS(serverTLS)))
	sasl := &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA256, Username: "u", Password: "p"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	good := eddy.Security{TLS: &eddy.TLS{CAPEM: ca.PEM()}, SASL: sasl}
	c, err := kafkatest.DialWith(ctx, "secured", b.Addrs(), good.ApplyTo)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(ctx, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	if offs, err := c.EndOffsets(ctx, "t", 0); err != nil || len(offs) != 2 {
		t.Fatalf("end offsets over TLS+SCRAM: %v, %v", offs, err)
	}

	other, err := kafkatest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	bad := eddy.Security{TLS: &eddy.TLS{CAPEM: other.PEM()}, SASL: sasl}
	began := time.Now()
	_, err = kafkatest.DialWith(ctx, "secured", b.Addrs(), bad.ApplyTo)
	var verify *tls.CertificateVerificationError
	if !errors.As(err, &verify) || time.Since(began) > 10*time.Second {
		t.Fatalf("dial with an untrusted CA: %v after %v, want a certificate error at once", err, time.Since(began))
	}
}
