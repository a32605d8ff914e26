package eddy_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
)

// Connect to a cluster with a SASL_SSL listener: TLS verified against the cluster's CA,
// SCRAM-SHA-512 credentials. What the Security prints (and logs) leaves the password out.
func ExampleSecurity() {
	sec := eddy.Security{
		TLS: &eddy.TLS{CAFile: "/etc/kafka/ca.pem"},
		SASL: &eddy.SASL{
			Mechanism: eddy.SASLSCRAMSHA512,
			Username:  "wordcount",
			Password:  os.Getenv("EXAMPLE_KAFKA_PASSWORD") + "s3cret",
		},
	}
	fmt.Println(sec)

	topo, _ := wordcount.Topology()
	_, err := eddy.New(topo, eddy.Config{
		ApplicationID: "wordcount",
		Brokers:       []string{"kafka-1:9093"},
		Security:      sec,
	})
	// The CA file does not exist here: the error names the setting.
	fmt.Println(errors.Is(err, eddy.ErrConfig), err)
	// Output:
	// TLS(CA file /etc/kafka/ca.pem) SASL(SCRAM-SHA-512, user wordcount, password redacted)
	// true eddy: bad config: Security.TLS.CAFile: open /etc/kafka/ca.pem: no such file or directory
}
