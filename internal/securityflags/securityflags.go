// Package securityflags reads an eddy.Security (TLS and SASL) from command-line flags
// and environment variables, the same way for the eddy tool and the examples. A flag
// given on the command line wins over its variable.
//
//	flag                         variable                        meaning
//	--tls                        EDDY_TLS=true                   TLS with the system's CAs
//	--tls-ca-file FILE           EDDY_TLS_CA_FILE                PEM CAs of the brokers' certificates
//	--tls-cert-file FILE         EDDY_TLS_CERT_FILE              PEM client certificate
//	--tls-key-file FILE          EDDY_TLS_KEY_FILE               PEM private key of the certificate
//	--tls-server-name NAME       EDDY_TLS_SERVER_NAME            name the brokers' certificates carry
//	--tls-insecure-skip-verify   EDDY_TLS_INSECURE_SKIP_VERIFY   accept any certificate (tests only)
//	--sasl-mechanism M           EDDY_SASL_MECHANISM             PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
//	--sasl-username U            EDDY_SASL_USERNAME              for PLAIN and SCRAM
//	--sasl-password-file FILE    EDDY_SASL_PASSWORD_FILE         file holding the password
//	(no flag)                    EDDY_SASL_PASSWORD              the password itself
//	--sasl-token-file FILE       EDDY_SASL_TOKEN_FILE            OAUTHBEARER token, read at each connection
//
// Any --tls-* setting turns TLS on. The password has no flag of its own: a command
// line is visible to every user of the machine (ps), a variable or a file is not.
package securityflags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
)

// Environment variables read by Flags.Security.
const (
	EnvTLS              = "EDDY_TLS"
	EnvTLSCAFile        = "EDDY_TLS_CA_FILE"
	EnvTLSCertFile      = "EDDY_TLS_CERT_FILE"
	EnvTLSKeyFile       = "EDDY_TLS_KEY_FILE"
	EnvTLSServerName    = "EDDY_TLS_SERVER_NAME"
	EnvTLSInsecure      = "EDDY_TLS_INSECURE_SKIP_VERIFY"
	EnvSASLMechanism    = "EDDY_SASL_MECHANISM"
	EnvSASLUsername     = "EDDY_SASL_USERNAME"
	EnvSASLPassword     = "EDDY_SASL_PASSWORD"
	EnvSASLPasswordFile = "EDDY_SASL_PASSWORD_FILE"
	EnvSASLTokenFile    = "EDDY_SASL_TOKEN_FILE"
)

// Usage is a paragraph for a command's help text.
const Usage = `Security (a flag wins over its environment variable):
  --tls (EDDY_TLS=true), --tls-ca-file (EDDY_TLS_CA_FILE), --tls-cert-file (EDDY_TLS_CERT_FILE),
  --tls-key-file (EDDY_TLS_KEY_FILE), --tls-server-name (EDDY_TLS_SERVER_NAME),
  --tls-insecure-skip-verify (EDDY_TLS_INSECURE_SKIP_VERIFY, tests only);
  --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER (EDDY_SASL_MECHANISM),
  --sasl-username (EDDY_SASL_USERNAME), the password in EDDY_SASL_PASSWORD or a file
  (--sasl-password-file, EDDY_SASL_PASSWORD_FILE), the OAUTHBEARER token in a file read
  at each connection (--sasl-token-file, EDDY_SASL_TOKEN_FILE).
`

// Flags are the security flags of one flag set.
type Flags struct {
	fs       *flag.FlagSet
	tls      bool
	caFile   string
	certFile string
	keyFile  string
	server   string
	insecure bool
	mech     string
	user     string
	pwFile   string
	tokFile  string
}

// Register adds the security flags to fs.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (also implied by any --tls-* flag) [$"+EnvTLS+"]")
	fs.StringVar(&f.caFile, "tls-ca-file", "", "PEM `file` of the CAs that signed the brokers' certificates (default: the system's) [$"+EnvTLSCAFile+"]")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "PEM `file` of the client certificate [$"+EnvTLSCertFile+"]")
	fs.StringVar(&f.keyFile, "tls-key-file", "", "PEM `file` of the client certificate's private key [$"+EnvTLSKeyFile+"]")
	fs.StringVar(&f.server, "tls-server-name", "", "the `name` the brokers' certificates must carry (default: the host dialed) [$"+EnvTLSServerName+"]")
	fs.BoolVar(&f.insecure, "tls-insecure-skip-verify", false, "accept any broker certificate: encrypted but open to a man in the middle; tests only [$"+EnvTLSInsecure+"]")
	fs.StringVar(&f.mech, "sasl-mechanism", "", "SASL `mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER [$"+EnvSASLMechanism+"]")
	fs.StringVar(&f.user, "sasl-username", "", "SASL `user` for PLAIN and SCRAM [$"+EnvSASLUsername+"]")
	fs.StringVar(&f.pwFile, "sasl-password-file", "", "`file` holding the SASL password (or set $"+EnvSASLPassword+") [$"+EnvSASLPasswordFile+"]")
	fs.StringVar(&f.tokFile, "sasl-token-file", "", "`file` holding the OAUTHBEARER token, read at each connection [$"+EnvSASLTokenFile+"]")
	return f
}

// Security returns the settings of the parsed flags, each flag not given on the command
// line taken from its variable (getenv, usually os.Getenv). Errors name the flag and
// the variable and never show a secret.
func (f *Flags) Security(getenv func(string) string) (eddy.Security, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	str := func(v *string, name, env string) {
		if !set[name] {
			*v = strings.TrimSpace(getenv(env))
		}
	}
	var err error
	boolean := func(v *bool, name, env string) {
		if set[name] || getenv(env) == "" || err != nil {
			return
		}
		b, perr := strconv.ParseBool(getenv(env))
		if perr != nil {
			err = fmt.Errorf("%s=%q: want true or false", env, getenv(env))
		}
		*v = b
	}
	boolean(&f.tls, "tls", EnvTLS)
	boolean(&f.insecure, "tls-insecure-skip-verify", EnvTLSInsecure)
	if err != nil {
		return eddy.Security{}, err
	}
	str(&f.caFile, "tls-ca-file", EnvTLSCAFile)
	str(&f.certFile, "tls-cert-file", EnvTLSCertFile)
	str(&f.keyFile, "tls-key-file", EnvTLSKeyFile)
	str(&f.server, "tls-server-name", EnvTLSServerName)
	str(&f.mech, "sasl-mechanism", EnvSASLMechanism)
	str(&f.user, "sasl-username", EnvSASLUsername)
	str(&f.pwFile, "sasl-password-file", EnvSASLPasswordFile)
	str(&f.tokFile, "sasl-token-file", EnvSASLTokenFile)

	var sec eddy.Security
	if f.tls || f.insecure || f.caFile != "" || f.certFile != "" || f.keyFile != "" || f.server != "" {
		sec.TLS = &eddy.TLS{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile, ServerName: f.server, InsecureSkipVerifyCertificates: f.insecure}
	}
	password := getenv(EnvSASLPassword)
	if f.mech == "" {
		if f.user != "" || password != "" || f.pwFile != "" || f.tokFile != "" {
			return sec, fmt.Errorf("--sasl-mechanism (%s) is required with a SASL username, password or token: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", EnvSASLMechanism)
		}
	} else {
		mech := eddy.SASLMechanism(strings.ToUpper(f.mech))
		switch mech {
		case eddy.SASLPlain, eddy.SASLSCRAMSHA256, eddy.SASLSCRAMSHA512:
			if f.user == "" {
				return sec, fmt.Errorf("--sasl-username (%s) is required with %s", EnvSASLUsername, mech)
			}
			if f.pwFile != "" {
				if password != "" {
					return sec, fmt.Errorf("the password is given twice: set %s or --sasl-password-file (%s), not both", EnvSASLPassword, EnvSASLPasswordFile)
				}
				b, rerr := os.ReadFile(f.pwFile)
				if rerr != nil {
					return sec, fmt.Errorf("--sasl-password-file (%s): %w", EnvSASLPasswordFile, rerr)
				}
				password = strings.TrimRight(string(b), "\r\n")
			}
			if password == "" {
				return sec, fmt.Errorf("%s needs a password: set %s or --sasl-password-file (%s)", mech, EnvSASLPassword, EnvSASLPasswordFile)
			}
			if f.tokFile != "" {
				return sec, fmt.Errorf("--sasl-token-file (%s) is for OAUTHBEARER, not %s", EnvSASLTokenFile, mech)
			}
			sec.SASL = &eddy.SASL{Mechanism: mech, Username: f.user, Password: password}
		case eddy.SASLOAuthBearer:
			if f.tokFile == "" {
				return sec, fmt.Errorf("OAUTHBEARER needs --sasl-token-file (%s)", EnvSASLTokenFile)
			}
			if f.user != "" || password != "" || f.pwFile != "" {
				return sec, fmt.Errorf("OAUTHBEARER authenticates with the token of --sasl-token-file: drop the SASL username and password")
			}
			sec.SASL = &eddy.SASL{Mechanism: mech, TokenSource: tokenFile(f.tokFile)}
		default:
			return sec, fmt.Errorf("--sasl-mechanism (%s) %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", EnvSASLMechanism, f.mech)
		}
	}
	// Check the files now, not at the first connection.
	if err := sec.ApplyTo(sarama.NewConfig()); err != nil {
		return sec, err
	}
	return sec, nil
}

// tokenFile reads the token at each call, so that a token refreshed in the file by
// another process is picked up at the next connection.
func tokenFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("OAUTHBEARER token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", errors.New("OAUTHBEARER token: the file " + path + " is empty")
		}
		return tok, nil
	}
}
