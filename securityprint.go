package eddy

import (
	"encoding/json"
	"log/slog"
	"strings"
)

// Secrets never appear in what a Security, TLS or SASL value prints: String, GoString,
// LogValue and MarshalJSON show which settings are set, never their values.

// String describes s without its secrets, like
// "TLS(CA file /etc/ca.pem, client certificate) SASL(SCRAM-SHA-512 user app, password redacted)".
func (s Security) String() string {
	var parts []string
	if s.TLS != nil {
		parts = append(parts, s.TLS.String())
	}
	if s.SASL != nil {
		parts = append(parts, s.SASL.String())
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, " ")
}

// GoString is String: %#v must not print the secrets either.
func (s Security) GoString() string { return s.String() }

// LogValue logs s without its secrets.
func (s Security) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes String, so that JSON logs of a Config leak nothing.
func (s Security) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (t TLS) String() string {
	var parts []string
	switch {
	case t.CAFile != "":
		parts = append(parts, "CA file "+t.CAFile)
	case len(t.CAPEM) > 0:
		parts = append(parts, "CA PEM")
	default:
		parts = append(parts, "system CAs")
	}
	if t.CertFile != "" {
		parts = append(parts, "client certificate "+t.CertFile)
	} else if len(t.CertPEM) > 0 {
		parts = append(parts, "client certificate PEM")
	}
	if t.KeyFile != "" || len(t.KeyPEM) > 0 {
		parts = append(parts, "key redacted")
	}
	if t.ServerName != "" {
		parts = append(parts, "server name "+t.ServerName)
	}
	if t.InsecureSkipVerifyCertificates {
		parts = append(parts, "INSECURE: certificates not verified")
	}
	return "TLS(" + strings.Join(parts, ", ") + ")"
}

// GoString is String: %#v must not print the key.
func (t TLS) GoString() string { return t.String() }

// LogValue logs t without the key.
func (t TLS) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON writes String.
func (t TLS) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

func (a SASL) String() string {
	parts := []string{string(a.Mechanism)}
	if a.Username != "" {
		parts = append(parts, "user "+a.Username)
	}
	if a.Password != "" {
		parts = append(parts, "password redacted")
	}
	if a.TokenSource != nil {
		parts = append(parts, "token source")
	}
	return "SASL(" + strings.Join(parts, ", ") + ")"
}

// GoString is String: %#v must not print the password.
func (a SASL) GoString() string { return a.String() }

// LogValue logs a without the password.
func (a SASL) LogValue() slog.Value { return slog.StringValue(a.String()) }

// MarshalJSON writes String.
func (a SASL) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }
