package eddy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		e.waitCountsWhileRunning(t, in, 2*time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.checkExactlyOnce(t)
	})

	// failingWith runs the word count with the secured listener's settings as adjust
	// changes them, and returns how Run ended and when.
	failingWith := func(t *testing.T, adjust func(*eddy.Config)) (error, time.Duration) {
		e := newWordCount(t, c, 1)
		cfg := e.config(t)
		cfg.Security = sec
		adjust(&cfg)
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
	failing := func(t *testing.T, bad eddy.Security) (error, time.Duration) {
		return failingWith(t, func(cfg *eddy.Config) { cfg.Security = bad })
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
	testExpiredCertificates(t, sec, failingWith)

	// OAUTHBEARER: the broker's built-in unsecured validator takes an unsigned JWT whose
	// "sub" is the principal (eddy-app, which has the ACLs) and whose "exp" is ahead.
	oauth := func(exp time.Time) eddy.Security {
		token := unsecuredJWT(sec.SASL.Username, exp)
		return eddy.Security{TLS: sec.TLS, SASL: &eddy.SASL{Mechanism: eddy.SASLOAuthBearer,
			TokenSource: func(context.Context) (string, error) { return token, nil }}}
	}
	t.Run("OAUTHBEARER word count exactly-once", func(t *testing.T) {
		e := newWordCount(t, c, 2)
		e.produce(t, 100)
		cfg := e.config(t)
		cfg.Security = oauth(time.Now().Add(time.Hour))
		in := start(t, e.topo, cfg)
		e.waitCountsWhileRunning(t, in, 2*time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.checkExactlyOnce(t)
	})
	t.Run("OAUTHBEARER expired token", func(t *testing.T) {
		err, took := failing(t, oauth(time.Now().Add(-time.Hour)))
		if err == nil || took > failFast || !errors.Is(err, eddy.ErrNotAuthorized) || !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Fatalf("Run: %v after %v, want eddy.ErrNotAuthorized and sarama.ErrSASLAuthenticationFailed within %v", err, took, failFast)
		}
	})
}

// unsecuredJWT is an unsigned JWT ("alg":"none") for sub, valid until exp, as Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler accepts.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	header := enc([]byte(`{"alg":"none"}`))
	claims := enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, time.Now().Add(-time.Minute).Unix(), exp.Unix()))
	return header + "." + claims + "."
}

// secureEnvRequired reads a setting of the secured listener that test.sh provides,
// failing the test when it is missing.
func secureEnvRequired(t *testing.T, name string) string {
	t.Helper()
	v := secureEnv(name)
	if v == "" {
		t.Fatalf("%s is not set: start the broker with this integration/kafka.sh (EDDY_KAFKA_SECURE=1; it prints the setting with secure-env)", name)
	}
	return v
}

// The certificates that expired (kafka.sh makes them, valid in January 2020 only): a
// client presenting one is refused by the broker in the TLS handshake; a broker serving
// one is refused by eddy. Each stops Run fast with an error naming the expiry.
func testExpiredCertificates(t *testing.T, sec eddy.Security, failingWith func(*testing.T, func(*eddy.Config)) (error, time.Duration)) {
	t.Run("expired client certificate", func(t *testing.T) {
		tls := *sec.TLS
		tls.CertFile = secureEnvRequired(t, "EDDY_SECURE_EXPIRED_CERT_FILE")
		tls.KeyFile = secureEnvRequired(t, "EDDY_SECURE_EXPIRED_KEY_FILE")
		err, took := failingWith(t, func(cfg *eddy.Config) { cfg.Security.TLS = &tls })
		// Kafka's alert is "unknown certificate"; eddy tells why.
		if err == nil || took > failFast || !errors.Is(err, eddy.ErrNotAuthorized) ||
			!strings.Contains(err.Error(), "the broker refused the client certificate") || !strings.Contains(err.Error(), "CN=eddy-app expired at 2020-02-01") {
			t.Fatalf("Run: %v after %v, want eddy.ErrNotAuthorized naming the expired client certificate within %v", err, took, failFast)
		}
	})
	t.Run("expired broker certificate", func(t *testing.T) {
		expired := strings.Split(secureEnvRequired(t, "EDDY_SECURE_EXPIRED_BROKERS"), ",")
		err, took := failingWith(t, func(cfg *eddy.Config) { cfg.Brokers = expired })
		if err == nil || took > failFast || !strings.Contains(err.Error(), "x509: certificate has expired") {
			t.Fatalf("Run: %v after %v, want an error naming the expired certificate within %v", err, took, failFast)
		}
	})
}

// TestSecuredKafkaMissingACL denies, on real Kafka with the StandardAuthorizer, one ACL
// an application needs to a principal that has every other (a SCRAM user the test
// creates through the PLAINTEXT listener, where the broker's ANONYMOUS principal is a
// super user): Run must stop within failFast with an error wrapping
// eddy.ErrNotAuthorized and the broker's error that names the ACL to grant, and nothing
// may be committed (no output visible to read_committed readers, no committed offsets).
func TestSecuredKafkaMissingACL(t *testing.T) {
	addrs := secureEnv(secureBrokersEnv)
	plain := kafkatest.BrokersFromEnv()
	if addrs == "" || len(plain) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s or %s is not set in CI: test.sh starts the broker with EDDY_KAFKA_SECURE=1 and exports both", secureBrokersEnv, kafkatest.BrokersEnv)
		}
		t.Skipf("%s or %s is not set: no secured Kafka (see TestSecuredKafka)", secureBrokersEnv, kafkatest.BrokersEnv)
	}
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	sec, err := securityflags.Register(fs).Security(secureEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := kafkatest.DialWith(ctx, "kafka-secured", strings.Split(addrs, ","), sec.ApplyTo)
	if err != nil {
		t.Fatal(err)
	}
	admin := kafkatest.Connect(t, "kafka-plaintext", plain)
	resources := map[kmsg.ACLResourceType]sarama.AclResourceType{
		kmsg.ACLResourceTypeTopic: sarama.AclResourceTopic, kmsg.ACLResourceTypeGroup: sarama.AclResourceGroup,
		kmsg.ACLResourceTypeTransactionalId: sarama.AclResourceTransactionalID,
	}
	operations := map[kmsg.ACLOperation]sarama.AclOperation{
		kmsg.ACLOperationRead: sarama.AclOperationRead, kmsg.ACLOperationWrite: sarama.AclOperationWrite,
		kmsg.ACLOperationDescribe: sarama.AclOperationDescribe,
	}
	for _, tc := range missingACLCases {
		t.Run(tc.name, func(t *testing.T) {
			user := admin.Unique("acl")
			password := "pw-" + testSecret + user
			deny := aclBinding{resources[tc.resource], operations[tc.op], sarama.AclPermissionDeny}
			grantUser(t, plain, user, password, deny)
			e := newWordCount(t, c, 1)
			e.produce(t, 10)
			cfg := e.config(t)
			cfg.Security = eddy.Security{TLS: sec.TLS, SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: user, Password: password}}
			app, err := eddy.New(e.topo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			err = app.Run(rctx)
			took := time.Since(began)
			t.Logf("Run after %v: %v", took, err)
			if err == nil || took > failFast {
				t.Fatalf("Run returned %v after %v, want a refusal within %v", err, took, failFast)
			}
			if !errors.Is(err, eddy.ErrNotAuthorized) || !errors.Is(err, tc.broker) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want eddy.ErrNotAuthorized, %v and %q", err, tc.broker, tc.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error %q shows the password", err)
			}
			// Nothing committed half: no output, no committed offsets.
			out, err := admin.ReadCommitted(ctx, e.output)
			if err != nil {
				t.Fatal(err)
			}
			committed, err := admin.CommittedOffsets(ctx, e.appID, e.input)
			if err != nil {
				t.Fatal(err)
			}
			for p, off := range committed {
				if off >= 0 {
					t.Errorf("input partition %d: offset %d committed", p, off)
				}
			}
			if len(out) > 0 {
				t.Errorf("%d output records committed", len(out))
			}
		})
	}
}

// aclBinding is one ACL of a test principal on every resource (name "*") of a type.
type aclBinding struct {
	resource   sarama.AclResourceType
	operation  sarama.AclOperation
	permission sarama.AclPermissionType
}

// grantUser creates the SCRAM-SHA-512 user on the cluster and gives it what an eddy
// application needs (ALL on topics, groups and transactional IDs, IdempotentWrite on
// the cluster) and the extra ACL (a DENY wins over the ALLOWs), then waits until the
// broker has them all. They are removed when the test ends.
func grantUser(t *testing.T, addrs []string, user, password string, extra aclBinding) {
	t.Helper()
	principal := "User:" + user
	acls := []aclBinding{
		{sarama.AclResourceTopic, sarama.AclOperationAll, sarama.AclPermissionAllow},
		{sarama.AclResourceGroup, sarama.AclOperationAll, sarama.AclPermissionAllow},
		{sarama.AclResourceTransactionalID, sarama.AclOperationAll, sarama.AclPermissionAllow},
		{sarama.AclResourceCluster, sarama.AclOperationIdempotentWrite, sarama.AclPermissionAllow},
		extra,
	}
	resource := func(a aclBinding) sarama.Resource {
		name := "*"
		if a.resource == sarama.AclResourceCluster {
			name = "kafka-cluster"
		}
		return sarama.Resource{ResourceType: a.resource, ResourceName: name, ResourcePatternType: sarama.AclPatternLiteral}
	}
	err := withAdmin(addrs, func(ca sarama.ClusterAdmin) error {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return err
		}
		res, err := ca.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{{
			Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512, Iterations: 4096, Salt: salt, Password: []byte(password),
		}})
		if err != nil {
			return err
		}
		for _, r := range res {
			if !errors.Is(r.ErrorCode, sarama.ErrNoError) {
				return fmt.Errorf("SCRAM user %s: %w", r.User, r.ErrorCode)
			}
		}
		var ras []*sarama.ResourceAcls
		for _, a := range acls {
			ras = append(ras, &sarama.ResourceAcls{Resource: resource(a), Acls: []*sarama.Acl{{Principal: principal, Host: "*", Operation: a.operation, PermissionType: a.permission}}})
		}
		if err := ca.CreateACLs(ras); err != nil {
			return err
		}
		// The broker applies users and ACLs from the metadata log: wait until it
		// describes them all.
		deadline := time.Now().Add(30 * time.Second)
		for {
			users, uerr := ca.DescribeUserScramCredentials([]string{user})
			got, aerr := ca.ListAcls(sarama.AclFilter{Principal: &principal, ResourcePatternTypeFilter: sarama.AclPatternAny, ResourceType: sarama.AclResourceAny, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
			n := 0
			for _, r := range got {
				n += len(r.Acls)
			}
			if uerr == nil && aerr == nil && len(users) == 1 && len(users[0].CredentialInfos) > 0 && n == len(acls) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("user %s and its %d ACLs not visible after 30 s (%d ACLs; %v; %v)", user, len(acls), n, uerr, aerr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = withAdmin(addrs, func(ca sarama.ClusterAdmin) error {
			_, _ = ca.DeleteACL(sarama.AclFilter{Principal: &principal, ResourcePatternTypeFilter: sarama.AclPatternAny, ResourceType: sarama.AclResourceAny, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}, false)
			_, _ = ca.DeleteUserScramCredentials([]sarama.AlterUserScramCredentialsDelete{{Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512}})
			return nil
		})
	})
}

// withAdmin runs fn with a cluster admin of addrs.
func withAdmin(addrs []string, fn func(sarama.ClusterAdmin) error) error {
	ca, err := sarama.NewClusterAdmin(addrs, kafkatest.NewSaramaConfig())
	if err != nil {
		return err
	}
	defer ca.Close()
	return fn(ca)
}
