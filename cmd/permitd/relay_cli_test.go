package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRelayRefusesUnsafeOrIncompleteSettings: permitd relay and worker
// --relay as a script meets them: every refusal is a usage error (exit 2,
// one line naming what is missing), and --validate accepts what they
// accept without reaching the network.
func TestRelayRefusesUnsafeOrIncompleteSettings(t *testing.T) {
	bin := permitdUnderTest(t)
	dir := t.TempDir()
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "relay", "--hosts", "127.0.0.1"), exitOK)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "node-relay.crt"), filepath.Join(dir, "node-relay.key")
	relay := func(args ...string) cliResult {
		return runCLI(t, bin, nil, append([]string{"relay", "--servers", "127.0.0.1:1", "--validate"}, args...)...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"off loopback in clear", []string{"--listen", "0.0.0.0:0"}, "--insecure"},
		{"off loopback, TLS without tokens", []string{"--listen", "0.0.0.0:0", "--listen-tls-cert", cert, "--listen-tls-key", key}, "--insecure"},
		{"off loopback, tokens without TLS", []string{"--listen", "0.0.0.0:0", "--token-file", tokens}, "--insecure"},
		{"metrics off loopback", []string{"--metrics-addr", "0.0.0.0:0"}, "--insecure"},
		{"TLS upstream, plaintext workers", []string{"--tls-ca", filepath.Join(dir, "ca.crt")}, "--listen-tls-cert"},
		{"a certificate without its key", []string{"--listen-tls-cert", cert}, "--listen-tls-key"},
		{"an unknown upstream", []string{"--upstream", "nearest"}, "--upstream"},
		{"max-inflight out of range", []string{"--max-inflight", "0"}, "--max-inflight"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantUsageError(t, relay(tc.args...), tc.want) })
	}
	wantUsageError(t, runCLI(t, bin, nil, "relay", "--validate"), "--servers is required")
	for name, args := range map[string][]string{
		"loopback":                 nil,
		"off loopback, insecure":   {"--listen", "0.0.0.0:0", "--insecure"},
		"off loopback, TLS+tokens": {"--listen", "0.0.0.0:0", "--listen-tls-cert", cert, "--listen-tls-key", key, "--token-file", tokens},
		"TLS both ways":            {"--tls-ca", filepath.Join(dir, "ca.crt"), "--listen-tls-cert", cert, "--listen-tls-key", key},
	} {
		if r := relay(args...); r.code != exitOK {
			t.Errorf("%s: %v; want accepted", name, r)
		}
	}
	wantUsageError(t, runCLI(t, bin, nil, "worker", "--group", "g", "--limit", "l", "--servers", "127.0.0.1:1", "--relay", "127.0.0.1:2",
		"--register-protocol", "http", "--validate"), "--relay needs --register-protocol binary")
	if r := runCLI(t, bin, nil, "worker", "--group", "g", "--limit", "l", "--servers", "127.0.0.1:1", "--relay", "127.0.0.1:2", "--validate"); r.code != exitOK {
		t.Errorf("worker --relay: %v; want accepted", r)
	}
}
