package eddy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// missingACLCases are the ACLs an application needs, each denied in turn: Run must
// stop within failFast with an error (wrapping eddy.ErrNotAuthorized and the broker's
// error) that names the ACL to grant.
var missingACLCases = []struct {
	name     string
	resource kmsg.ACLResourceType
	op       kmsg.ACLOperation
	broker   error
	want     string
}{
	{"write on transactional ID", kmsg.ACLResourceTypeTransactionalId, kmsg.ACLOperationWrite, sarama.ErrTransactionalIDAuthorizationFailed, "WRITE and DESCRIBE on the transactional IDs with prefix"},
	{"describe on topic", kmsg.ACLResourceTypeTopic, kmsg.ACLOperationDescribe, sarama.ErrTopicAuthorizationFailed, "DESCRIBE on every topic"},
	{"read on topic", kmsg.ACLResourceTypeTopic, kmsg.ACLOperationRead, sarama.ErrTopicAuthorizationFailed, "DESCRIBE on every topic"},
	{"read on group", kmsg.ACLResourceTypeGroup, kmsg.ACLOperationRead, sarama.ErrGroupAuthorizationFailed, "READ (and DESCRIBE) on the group"},
	// eddy checks the topics' authorized operations before it starts its tasks: a
	// producer never meets the refused AddPartitionsToTxn, whose path in sarama 1.61.1
	// has a data race (transactionManager.transitionTo against publishTxnPartitions).
	{"write on topic", kmsg.ACLResourceTypeTopic, kmsg.ACLOperationWrite, sarama.ErrTopicAuthorizationFailed, "does not authorize WRITE on it"},
}

func TestMissingACLFailsFastNamingIt(t *testing.T) {
	pki := newTestPKI(t)
	allow := func(res kmsg.ACLResourceType) kfake.ACL {
		return kfake.ACL{Resource: res, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	for _, tc := range missingACLCases {
		t.Run(tc.name, func(t *testing.T) {
			denied := kfake.ACL{Resource: tc.resource, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: tc.op, Allow: false}
			c := kafkatest.Embedded(t, kafkatest.KfakeOptions(
				kfake.EnableSASL(), kfake.EnableACLs(),
				kfake.Superuser("SCRAM-SHA-512", "admin", adminPassword),
				kfake.User("SCRAM-SHA-512", "app", "app-"+testSecret,
					allow(kmsg.ACLResourceTypeTopic), allow(kmsg.ACLResourceTypeGroup), allow(kmsg.ACLResourceTypeCluster), allow(kmsg.ACLResourceTypeTransactionalId), denied),
				kfake.TLS(pki.serverTLS),
			))
			admin := eddy.Security{TLS: &eddy.TLS{CAPEM: pki.caPEM}, SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "admin", Password: adminPassword}}
			e := newWordCount(t, c.WithSarama(admin.ApplyTo), 1)
			e.produce(t, 10)
			cfg := e.config(t)
			cfg.Security = eddy.Security{TLS: admin.TLS, SASL: &eddy.SASL{Mechanism: eddy.SASLSCRAMSHA512, Username: "app", Password: "app-" + testSecret}}
			app, err := eddy.New(e.topo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			err = app.Run(ctx)
			took := time.Since(began)
			t.Logf("Run after %v: %v", took, err)
			if err == nil || took > failFast {
				t.Fatalf("Run returned %v after %v, want a refusal within %v", err, took, failFast)
			}
			if !errors.Is(err, eddy.ErrNotAuthorized) || !errors.Is(err, tc.broker) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want eddy.ErrNotAuthorized, %v and %q", err, tc.broker, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Fatalf("error %q shows the password", err)
			}
			if got := app.State(); got != eddy.StateFailed {
				t.Errorf("state after the refusal: %v, want failed", got)
			}
		})
	}
}
