package securityflags

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
)

const secret = "s3cret-never-printed"

func parse(t *testing.T, args []string, env map[string]string) (eddy.Security, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Security(func(k string) string { return env[k] })
}

func TestNothingSetIsPlaintext(t *testing.T) {
	sec, err := parse(t, nil, nil)
	if err != nil || sec.TLS != nil || sec.SASL != nil {
		t.Fatalf("got %v, %v; want plaintext", sec, err)
	}
}

func TestEnvironmentAndFlags(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// From the environment only.
	sec, err := parse(t, nil, map[string]string{
		EnvTLS: "true", EnvTLSServerName: "kafka.example",
		EnvSASLMechanism: "scram-sha-512", EnvSASLUsername: "app", EnvSASLPassword: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sec.TLS == nil || sec.TLS.ServerName != "kafka.example" || sec.TLS.CAFile != "" {
		t.Fatalf("TLS %v", sec.TLS)
	}
	if sec.SASL == nil || sec.SASL.Mechanism != eddy.SASLSCRAMSHA512 || sec.SASL.Username != "app" || sec.SASL.Password != secret {
		t.Fatalf("SASL %v", sec.SASL)
	}
	// A flag wins over its variable; the password file is read without its newline.
	sec, err = parse(t, []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "flaguser", "--sasl-password-file", pwFile, "--tls-server-name", "flag.example"},
		map[string]string{EnvSASLMechanism: "SCRAM-SHA-256", EnvSASLUsername: "envuser", EnvTLSServerName: "env.example"})
	if err != nil {
		t.Fatal(err)
	}
	if sec.SASL.Mechanism != eddy.SASLPlain || sec.SASL.Username != "flaguser" || sec.SASL.Password != secret+"-file" || sec.TLS.ServerName != "flag.example" {
		t.Fatalf("flags did not win: %v / %v / %q", sec, sec.SASL.Username, sec.TLS.ServerName)
	}
	// A false flag wins over a true variable.
	sec, err = parse(t, []string{"--tls=false"}, map[string]string{EnvTLS: "true"})
	if err != nil || sec.TLS != nil {
		t.Fatalf("--tls=false with EDDY_TLS=true: %v, %v", sec, err)
	}
}

func TestTokenFileIsReadAtEachConnection(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sec, err := parse(t, []string{"--sasl-mechanism", "OAUTHBEARER"}, map[string]string{EnvSASLTokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first", "second"} {
		got, err := sec.SASL.TokenSource(context.Background())
		if err != nil || got != want {
			t.Fatalf("token %q, %v; want %q", got, err, want)
		}
		if err := os.WriteFile(tok, []byte("second"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrorsNameFlagAndVariable(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{nil, map[string]string{EnvSASLUsername: "u", EnvSASLPassword: secret}, []string{"--sasl-mechanism", EnvSASLMechanism, "required"}},
		{[]string{"--sasl-mechanism", "GSSAPI"}, nil, []string{"--sasl-mechanism", EnvSASLMechanism, `"GSSAPI"`}},
		{[]string{"--sasl-mechanism", "SCRAM-SHA-256"}, map[string]string{EnvSASLPassword: secret}, []string{"--sasl-username", EnvSASLUsername}},
		{[]string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, nil, []string{EnvSASLPassword, "--sasl-password-file"}},
		{[]string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", "/nonexistent/pw"}, nil, []string{"--sasl-password-file", "no such file"}},
		{[]string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", "/nonexistent/pw"}, map[string]string{EnvSASLPassword: secret}, []string{"given twice"}},
		{[]string{"--sasl-mechanism", "OAUTHBEARER"}, nil, []string{"--sasl-token-file", EnvSASLTokenFile}},
		{nil, map[string]string{EnvTLS: "yes please"}, []string{EnvTLS, "true or false"}},
		{[]string{"--tls-ca-file", "/nonexistent/ca.pem"}, nil, []string{"Security.TLS.CAFile", "no such file"}},
	}
	for _, tc := range cases {
		_, err := parse(t, tc.args, tc.env)
		if err == nil {
			t.Errorf("%v %v: no error", tc.args, tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %v: error %q lacks %q", tc.args, tc.env, err, w)
			}
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows the password", err)
		}
	}
}
