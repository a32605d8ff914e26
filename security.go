package eddy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// Security is how eddy's clients reach a secured Kafka cluster: TLS (Kafka's SSL and
// SASL_SSL listeners) and SASL authentication. The zero value is plaintext without
// authentication. It is applied to the base sarama configuration from which every
// client of an App is derived (consumer group, admin, restore readers, producers), and
// the eddy tool takes the same settings from flags and environment variables.
//
// Secrets (passwords, private keys, tokens) never appear in what Security prints: its
// String, GoString, LogValue and MarshalJSON redact them, and its errors name fields,
// not values.
type Security struct {
	// TLS, if set, encrypts every connection and verifies the brokers' certificates.
	TLS *TLS
	// SASL, if set, authenticates every connection. Without TLS the exchange is in
	// plaintext (Kafka's SASL_PLAINTEXT): a PLAIN password then crosses the network
	// readable by anyone on the path.
	SASL *SASL
}

// TLS configures encrypted connections. Brokers' certificates are verified against
// the CA (CAFile or CAPEM; neither: the system's roots) and ServerName.
type TLS struct {
	// CAFile or CAPEM: the PEM certificates of the CAs that signed the brokers'
	// certificates. At most one of them; neither means the system's root CAs.
	CAFile string
	CAPEM  []byte
	// CertFile and KeyFile, or CertPEM and KeyPEM: the client certificate and its
	// private key, for brokers that require client authentication (ssl.client.auth).
	// Both of a pair or neither.
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
	// ServerName is the name the brokers' certificates must carry; default: the host
	// of the address dialed.
	ServerName string
	// InsecureSkipVerifyCertificates accepts any broker certificate: the connection
	// is encrypted but not authenticated, open to a man in the middle. For tests only.
	// eddy refuses a configuration (for example one made by Config.Sarama) that skips
	// the verification without this field set.
	InsecureSkipVerifyCertificates bool
}

// SASLMechanism names a SASL mechanism as Kafka does (sasl.mechanism).
type SASLMechanism string

// The SASL mechanisms eddy supports.
const (
	SASLPlain       SASLMechanism = "PLAIN"
	SASLSCRAMSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLSCRAMSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
)

// SASL configures authentication.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.
	Mechanism SASLMechanism
	// Username and Password, for PLAIN and SCRAM.
	Username, Password string
	// TokenSource returns an OAuth 2 bearer token, for OAUTHBEARER. It is called
	// whenever a connection is opened, with a context that ends after 30 s; it
	// should cache the token and refresh it before it expires.
	TokenSource func(ctx context.Context) (string, error)
}

// tokenTimeout bounds one TokenSource call: sarama's AccessTokenProvider takes no
// context, and a token fetch that hangs would hang the connection.
const tokenTimeout = 30 * time.Second

// validate checks s; the errors name the field and say what to do.
func (s Security) validate() error {
	if t := s.TLS; t != nil {
		if t.CAFile != "" && len(t.CAPEM) > 0 {
			return configErr("Security.TLS.CAFile", "set CAFile or CAPEM, not both")
		}
		if t.CertFile != "" && len(t.CertPEM) > 0 {
			return configErr("Security.TLS.CertFile", "set CertFile or CertPEM, not both")
		}
		if t.KeyFile != "" && len(t.KeyPEM) > 0 {
			return configErr("Security.TLS.KeyFile", "set KeyFile or KeyPEM, not both")
		}
		hasCert, hasKey := t.CertFile != "" || len(t.CertPEM) > 0, t.KeyFile != "" || len(t.KeyPEM) > 0
		if hasCert != hasKey {
			return configErr("Security.TLS", "a client certificate needs its private key and a key its certificate: set both CertFile and KeyFile (or CertPEM and KeyPEM), or neither")
		}
		if t.InsecureSkipVerifyCertificates && (t.CAFile != "" || len(t.CAPEM) > 0 || t.ServerName != "") {
			return configErr("Security.TLS.InsecureSkipVerifyCertificates", "the CA and ServerName would be ignored: drop InsecureSkipVerifyCertificates to verify against them")
		}
	}
	if a := s.SASL; a != nil {
		switch a.Mechanism {
		case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
			if a.Username == "" {
				return configErr("Security.SASL.Username", "required with %s", a.Mechanism)
			}
			if a.Password == "" {
				return configErr("Security.SASL.Password", "required with %s", a.Mechanism)
			}
			if a.TokenSource != nil {
				return configErr("Security.SASL.TokenSource", "only used with OAUTHBEARER, not %s", a.Mechanism)
			}
		case SASLOAuthBearer:
			if a.TokenSource == nil {
				return configErr("Security.SASL.TokenSource", "required with OAUTHBEARER")
			}
			if a.Username != "" || a.Password != "" {
				return configErr("Security.SASL.Username", "OAUTHBEARER authenticates with the token of TokenSource: leave Username and Password empty")
			}
		case "":
			return configErr("Security.SASL.Mechanism", "required: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
		default:
			return configErr("Security.SASL.Mechanism", "%q is not supported: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", a.Mechanism)
		}
	}
	return nil
}

// ApplyTo sets the TLS and SASL settings of sc (Net.TLS, Net.SASL). It reads the
// certificate files named. eddy calls it for the clients it makes; tools that make
// their own sarama clients for the same cluster call it too.
func (s Security) ApplyTo(sc *sarama.Config) error {
	if err := s.validate(); err != nil {
		return err
	}
	if s.TLS != nil {
		tc, err := s.TLS.config()
		if err != nil {
			return err
		}
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = tc
	}
	if a := s.SASL; a != nil {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.Version = sarama.SASLHandshakeV1
		sc.Net.SASL.Mechanism = sarama.SASLMechanism(a.Mechanism)
		switch a.Mechanism {
		case SASLOAuthBearer:
			sc.Net.SASL.TokenProvider = tokenProvider(a.TokenSource)
		default:
			sc.Net.SASL.User = a.Username
			sc.Net.SASL.Password = a.Password
		}
		switch a.Mechanism {
		case SASLSCRAMSHA256:
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
		case SASLSCRAMSHA512:
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
		}
	}
	return nil
}

// checkSkipVerify refuses a sarama configuration that skips the verification of the
// brokers' certificates unless Security says so explicitly: Config.Sarama could turn
// it on unnoticed.
func (s Security) checkSkipVerify(sc *sarama.Config) error {
	if sc.Net.TLS.Enable && sc.Net.TLS.Config != nil && sc.Net.TLS.Config.InsecureSkipVerify &&
		(s.TLS == nil || !s.TLS.InsecureSkipVerifyCertificates) {
		return configErr("Sarama", "the TLS configuration skips the verification of the brokers' certificates (InsecureSkipVerify): give the CA in Security.TLS instead, or set Security.TLS.InsecureSkipVerifyCertificates to accept the risk")
	}
	return nil
}

func (t *TLS) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerifyCertificates}
	ca, field := t.CAPEM, "Security.TLS.CAPEM"
	if t.CAFile != "" {
		field = "Security.TLS.CAFile"
		b, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, field, err)
		}
		ca = b
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, configErr(field, "no PEM certificate found (want \"-----BEGIN CERTIFICATE-----\" blocks)")
		}
		tc.RootCAs = pool
	}
	certPEM, keyPEM := t.CertPEM, t.KeyPEM
	if t.CertFile != "" {
		b, err := os.ReadFile(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("%w: Security.TLS.CertFile: %w", ErrConfig, err)
		}
		certPEM = b
	}
	if t.KeyFile != "" {
		b, err := os.ReadFile(t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: Security.TLS.KeyFile: %w", ErrConfig, err)
		}
		keyPEM = b
	}
	if len(certPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// tls.X509KeyPair's errors describe the blocks found, never the key's bytes.
			return nil, configErr("Security.TLS", "client certificate and key: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// certificateAlerts are the TLS alerts (as crypto/tls names them) a broker sends when
// it refuses the client's certificate in the handshake.
var certificateAlerts = []string{
	"bad certificate", "unsupported certificate", "revoked certificate", "expired certificate",
	"unknown certificate", "unknown certificate authority", "certificate required",
}

// certificateAlert returns the alert when err is a broker's TLS alert refusing the
// client's certificate ("" otherwise). crypto/tls reports a received alert as a
// *net.OpError with Op "remote error" and an unexported error type, so the alert is
// told by its text.
func certificateAlert(err error) string {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return ""
	}
	alert := strings.TrimPrefix(op.Err.Error(), "tls: ")
	if slices.Contains(certificateAlerts, alert) {
		return alert
	}
	return ""
}

// explainCertificateAlert says what a broker's refusal of the client's certificate
// (alert) means for this configuration. The broker gives no reason beyond the alert
// (Kafka's JSSE answers "unknown certificate" even for an expired one), so the
// certificate is checked here for what can be told without the broker's trust store.
func (t *TLS) explainCertificateAlert(alert string) string {
	lead := fmt.Sprintf("the broker refused the client certificate in the TLS handshake (%s)", alert)
	if t == nil {
		return lead + ": it requires one (ssl.client.auth=required): set Security.TLS.CertFile and KeyFile"
	}
	tc, err := t.config()
	if err != nil || len(tc.Certificates) == 0 {
		return lead + ": it requires one (ssl.client.auth=required): set Security.TLS.CertFile and KeyFile"
	}
	cert, err := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
	if err != nil {
		return lead
	}
	now := time.Now()
	switch {
	case now.After(cert.NotAfter):
		return fmt.Sprintf("%s: the certificate %s expired at %s; renew it", lead, cert.Subject, cert.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(cert.NotBefore):
		return fmt.Sprintf("%s: the certificate %s is valid only from %s (check the clocks)", lead, cert.Subject, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: the certificate %s (issued by %s, valid until %s) is in date: check that the broker trusts the CA that signed it (ssl.truststore) and that it allows client authentication (extended key usage)",
		lead, cert.Subject, cert.Issuer, cert.NotAfter.UTC().Format(time.RFC3339))
}

// tokenProvider adapts a TokenSource to sarama.
type tokenProvider func(ctx context.Context) (string, error)

func (f tokenProvider) Token() (*sarama.AccessToken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	tok, err := f(ctx)
	if err != nil {
		return nil, fmt.Errorf("eddy: Security.SASL.TokenSource: %w", err)
	}
	return &sarama.AccessToken{Token: tok}, nil
}

// scramClient is sarama's SCRAMClient on github.com/xdg-go/scram.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// ErrNotAuthorized is wrapped by the error Run returns when a broker refused the
// application's principal an operation (a missing ACL) or refused its credentials.
// The message names the ACL to grant; the broker's error stays in the chain
// (errors.Is(err, sarama.ErrGroupAuthorizationFailed) and so on).
var ErrNotAuthorized = errors.New("eddy: not authorized")

// explainRefusal returns err wrapped with ErrNotAuthorized and the ACL (or the
// credential) the application needs when err is a broker's authorization or
// authentication refusal, and err unchanged otherwise. The ACLs are those Kafka
// Streams documents for a secured cluster, named as kafka-acls.sh takes them.
func (c Config) explainRefusal(err error) error {
	if err == nil || errors.Is(err, ErrNotAuthorized) {
		return err
	}
	var need string
	switch {
	case errors.Is(err, sarama.ErrGroupAuthorizationFailed):
		need = fmt.Sprintf("the principal needs READ (and DESCRIBE) on the group %q (kafka-acls.sh --operation Read --group %s)", c.ApplicationID, c.ApplicationID)
	case errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed):
		need = fmt.Sprintf("the principal needs WRITE and DESCRIBE on the transactional IDs with prefix %q (kafka-acls.sh --operation Write --operation Describe --transactional-id %s- --resource-pattern-type prefixed)", c.ApplicationID+"-", c.ApplicationID)
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		need = fmt.Sprintf("the principal needs DESCRIBE on every topic it uses, READ on its source topics, WRITE on its sink and dead-letter topics, and READ, WRITE, CREATE, DELETE and DESCRIBE on its internal topics, prefix %q (the refused topic is named at the start of this error)", c.ApplicationID+"-")
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		need = "the principal needs an operation on the cluster: CREATE (or CREATE on the topics with the application's prefix) to create internal topics, IDEMPOTENT_WRITE on brokers before Kafka 3.0"
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		need = "the broker refused the credentials: check Security.SASL (mechanism, username, password or token)"
	case certificateAlert(err) != "":
		need = c.Security.TLS.explainCertificateAlert(certificateAlert(err))
	default:
		return err
	}
	return fmt.Errorf("%w: %w; %s", ErrNotAuthorized, err, need)
}
