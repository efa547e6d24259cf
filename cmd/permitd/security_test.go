package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/permitd/permitd/transport/auth"
)

// TestAgentRefusesPlaintextOffLoopback: a non-loopback listener without
// TLS, or --test-hooks on one, is a usage error that names --insecure;
// --insecure, TLS, or loopback addresses start (checked with --validate).
func TestAgentRefusesPlaintextOffLoopback(t *testing.T) {
	_, line, err := auth.NewSecret("root", auth.RoleAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--tls-cert", "n.crt", "--tls-key", "n.key", "--tls-ca", "ca.crt"}
	secured := append([]string{"--token-file", tokens}, tlsArgs...)
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" = accepted
	}{
		{"loopback", nil, ""},
		{"localhost", []string{"--http-addr", "localhost:8001"}, ""},
		{"all interfaces", []string{"--http-addr", "0.0.0.0:8001"}, "--insecure"},
		{"empty host", []string{"--http-addr", ":8001"}, "--insecure"},
		{"raft on a LAN address", []string{"--raft-addr", "10.1.2.3:7001"}, "--insecure"},
		{"advertised LAN address", []string{"--advertise", "10.1.2.3:7001"}, "--insecure"},
		{"--insecure", []string{"--http-addr", "0.0.0.0:8001", "--insecure"}, ""},
		{"TLS without tokens", append([]string{"--http-addr", "0.0.0.0:8001"}, tlsArgs...), "--token-file"},
		{"tokens without TLS", []string{"--http-addr", "0.0.0.0:8001", "--token-file", tokens}, "--tls-cert"},
		{"TLS and tokens", append([]string{"--http-addr", "0.0.0.0:8001"}, secured...), ""},
		{"raft off loopback with TLS", append([]string{"--raft-addr", "10.1.2.3:7001"}, tlsArgs...), ""},
		{"TLS and tokens with test hooks", append([]string{"--http-addr", "0.0.0.0:8001", "--test-hooks"}, secured...), "--test-hooks"},
		{"a token file that does not parse", []string{"--token-file", "/nonexistent/tokens"}, "--token-file"},
		{"test hooks and --insecure", []string{"--http-addr", "0.0.0.0:8001", "--test-hooks", "--insecure"}, ""},
		{"test hooks on loopback", []string{"--test-hooks"}, ""},
		{"half the TLS files", []string{"--tls-cert", "n.crt"}, "go together"},
		{"client certs without TLS", []string{"--client-cert-auth"}, "--client-cert-auth needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--initial-cluster", "n1=127.0.0.1:7001", "--validate"}, tc.args...)
			var stderr strings.Builder
			_, _, _, code := agentSettings(args, nil, io.Discard, &stderr)
			switch {
			case tc.wantErr == "" && code != exitOK:
				t.Errorf("refused (exit %d): %s", code, stderr.String())
			case tc.wantErr != "" && (code != exitUsage || !strings.Contains(stderr.String(), tc.wantErr)):
				t.Errorf("exit %d, stderr %q; want a usage error naming %s", code, stderr.String(), tc.wantErr)
			}
		})
	}
}

// TestWorkerRefusesPlaintextSidecarOffLoopback: the sidecar has no TLS or
// tokens yet, so a non-loopback --http-addr needs --insecure.
func TestWorkerRefusesPlaintextSidecarOffLoopback(t *testing.T) {
	bin := permitdUnderTest(t)
	r := runCLI(t, bin, nil, "worker", "--group", "g", "--limit", "l", "--servers", "127.0.0.1:1", "--http-addr", "0.0.0.0:0", "--validate")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--insecure") {
		t.Errorf("exit %d, stderr %q; want a usage error naming --insecure", r.code, r.stderr)
	}
	r = runCLI(t, bin, nil, "worker", "--group", "g", "--limit", "l", "--servers", "127.0.0.1:1", "--http-addr", "0.0.0.0:0", "--insecure", "--validate")
	if r.code != exitOK {
		t.Errorf("with --insecure: exit %d, stderr %q", r.code, r.stderr)
	}
	// Half the protection is none: TLS without tokens lets anyone spend
	// the fleet's permits, tokens without TLS send them in clear.
	dir := t.TempDir()
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "side"), exitOK)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, half := range map[string][]string{
		"TLS without tokens": {"--http-tls-cert", filepath.Join(dir, "node-side.crt"), "--http-tls-key", filepath.Join(dir, "node-side.key")},
		"tokens without TLS": {"--http-token-file", tokens},
	} {
		r = runCLI(t, bin, nil, append([]string{"worker", "--group", "g", "--limit", "l", "--servers", "127.0.0.1:1", "--http-addr", "0.0.0.0:0", "--validate"}, half...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--insecure") {
			t.Errorf("%s off loopback: exit %d, stderr %q; want a usage error naming --insecure", name, r.code, r.stderr)
		}
	}
}

// TestAgentInAClientShell: an agent started in a shell that exported the
// client commands' variables (the README's secure cluster exports
// PERMITD_SERVERS and PERMITD_TLS_CA) is not warned about PERMITD_SERVERS
// or PERMITD_TOKEN, which are no agent settings but no typo either; a
// lone PERMITD_TLS_CA, half an agent's TLS, is refused naming the
// variable and how to start without TLS.
func TestAgentInAClientShell(t *testing.T) {
	args := []string{"--id", "n1", "--data-dir", t.TempDir(), "--initial-cluster", "n1=127.0.0.1:7001", "--validate"}
	var stderr strings.Builder
	env := []string{"PERMITD_SERVERS=127.0.0.1:8001", "PERMITD_TOKEN=pmt_x", "PERMITD_TLS_CA=secure/certs/ca.crt"}
	_, _, _, code := agentSettings(args, env, io.Discard, &stderr)
	want := `--tls-cert, --tls-key and --tls-ca go together (got cert "", key "", ca "secure/certs/ca.crt"); PERMITD_TLS_CA came from the environment, where the client commands read it too: unset PERMITD_TLS_CA to start this agent without TLS, or give all three`
	if code != exitUsage || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want a usage error containing %q", code, stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("warned about a client variable: %q", stderr.String())
	}
	stderr.Reset()
	if _, _, _, code := agentSettings(args, env[:2], io.Discard, &stderr); code != exitOK || stderr.Len() > 0 {
		t.Errorf("with PERMITD_SERVERS and PERMITD_TOKEN only: exit %d, stderr %q; want a quiet start", code, stderr.String())
	}
	stderr.Reset()
	if _, _, _, code := agentSettings(args, []string{"PERMITD_SERVRES=x"}, io.Discard, &stderr); code != exitOK || !strings.Contains(stderr.String(), "ignoring PERMITD_SERVRES") {
		t.Errorf("a misspelt variable: exit %d, stderr %q; want its warning", code, stderr.String())
	}
}
