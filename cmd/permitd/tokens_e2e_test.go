package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/tlsfiles"
)

// newToken runs `permitd tokens create` and returns the secret and the
// token file line.
func newToken(t *testing.T, bin string, args ...string) (secret, line string) {
	t.Helper()
	r := runCLI(t, bin, nil, append([]string{"tokens", "create"}, args...)...)
	wantCode(t, r, exitOK)
	for l := range strings.SplitSeq(r.stdout, "\n") {
		if s, ok := strings.CutPrefix(l, "secret: "); ok {
			secret = s
		}
		if s, ok := strings.CutPrefix(l, "token file line: "); ok {
			line = s
		}
	}
	if secret == "" || line == "" {
		t.Fatalf("tokens create printed %q", r.stdout)
	}
	return secret, line
}

// TestTokensOnTheAPI: an agent with TLS and --token-file. The CLI's
// admin, client and worker tokens each do what their role allows and get
// 403 (exit 1, the role named) for the rest; no token is 401; the Go
// client's binary reserves authenticate on the API port; a SIGHUP after
// the client token's line is removed revokes it at once, on an open
// binary connection too, and a broken token file keeps the old tokens.
// With --sessions-per-token 1, the session the binary client opened is
// the client token's one: an open over HTTP with it is refused (503,
// a *client.SessionRefusedError), while another token opens its own.
func TestTokensOnTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	file := certsOfN1(t, bin)
	rootSecret, rootLine := newToken(t, bin, "--role", "admin", "--name", "root")
	appSecret, appLine := newToken(t, bin, "--role", "client", "--name", "app", "--limits", "api*")
	_, workerLine := newToken(t, bin, "--role", "worker", "--name", "w1")
	tokenFile := file("tokens")
	writeTokens := func(lines ...string) {
		if err := os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens(rootLine, appLine, workerLine)
	a := startLoneAgent(t, bin, "--tls-cert", file("node-n1.crt"), "--tls-key", file("node-n1.key"), "--tls-ca", file("ca.crt"), "--token-file", tokenFile, "--sessions-per-token", "1")
	as := func(secret string, args ...string) cliResult {
		env := []string{}
		if secret != "" {
			env = append(env, "PERMITD_TOKEN="+secret)
		}
		return runCLI(t, bin, env, append(args, "--servers", a.httpAddr, "--tls-ca", file("ca.crt"))...)
	}
	wantCode(t, as(rootSecret, "status", "--wait", "30s"), exitOK)
	wantCode(t, as(rootSecret, "limits", "put", "api", "--algorithm", "strict", "--rate", "1000", "--per", "1s", "--expiry", "1s"), exitOK)
	if r := as(appSecret, "reserve", "api", "--max-wait", "1s"); r.code != exitOK || !strings.Contains(r.stdout, `"granted":true`) {
		t.Fatalf("client token reserve: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		name   string
		secret string
		args   []string
		want   string
	}{
		{"client puts a limit", appSecret, []string{"limits", "put", "api2", "--algorithm", "strict", "--rate", "1"}, "role admin"},
		{"no token", "", []string{"reserve", "api"}, "401"},
		{"client outside its patterns", appSecret, []string{"reserve", "other"}, "api*"},
	} {
		r := as(tc.secret, tc.args...)
		if r.code != exitDenied || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, appSecret) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d (denied) naming %q, without the secret", tc.name, r.code, r.stderr, exitDenied, tc.want)
		}
	}

	conf, err := tlsfiles.Client(file("ca.crt"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// With sessions (the client's default): a session belongs to no
	// limit, so a restricted client token opens one.
	bc, err := client.New([]string{a.httpAddr}, client.WithTLS(conf), client.WithToken(appSecret), client.WithBinaryReserves(1), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if g, err := bc.Reserve(ctx, "api", 1, time.Second); err != nil || !g.Granted {
		t.Fatalf("binary reserve with a client token: %+v %v", g, err)
	}
	if _, err := bc.Reserve(ctx, "other", 1, 0); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("binary reserve outside the token's patterns: %v, want ErrForbidden", err)
	}
	for secret, wantRefused := range map[string]bool{appSecret: true, rootSecret: false} {
		hc, err := client.New([]string{a.httpAddr}, client.WithTLS(conf), client.WithToken(secret), client.WithRounds(1))
		if err != nil {
			t.Fatal(err)
		}
		var refused *client.SessionRefusedError
		if _, err := hc.OpenSession(ctx); errors.As(err, &refused) != wantRefused || (!wantRefused && err != nil) {
			t.Errorf("an HTTP open with --sessions-per-token 1 (token holds a session: %v): %v", wantRefused, err)
		}
	}
	anon, err := client.New([]string{a.httpAddr}, client.WithTLS(conf), client.WithBinaryReserves(1), client.WithoutSessions(), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Reserve(ctx, "api", 1, 0); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a binary reserve without a token: %v, want ErrUnauthorized (final, not retried as unavailable)", err)
	}
	// --validate never prints the token.
	if r := runCLI(t, bin, []string{"PERMITD_TOKEN=" + appSecret}, "worker", "--group", "g", "--limit", "api", "--servers", a.httpAddr, "--validate"); r.code != exitOK || strings.Contains(r.stdout, appSecret) || !strings.Contains(r.stdout, "<redacted>") {
		t.Errorf("worker --validate: exit %d, printed %q", r.code, r.stdout)
	}

	// A broken file keeps the tokens; a good one without app revokes it.
	writeTokens(rootLine, "broken line")
	a.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the failed reload logged", func() bool { return strings.Contains(a.log.String(), "token file not reloaded") })
	wantCode(t, as(appSecret, "reserve", "api", "--max-wait", "1s"), exitOK)
	writeTokens(rootLine, workerLine)
	a.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the reload", func() bool { return strings.Contains(a.log.String(), "tokens reloaded") })
	if r := as(appSecret, "reserve", "api"); r.code != exitDenied || !strings.Contains(r.stderr, "401") {
		t.Errorf("revoked token over HTTP: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := bc.Reserve(ctx, "api", 1, 0); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("revoked token on an open binary connection: %v, want ErrUnauthorized", err)
	}
}

// TestTokenBeforeTheServersRequireIt: a client given a token can talk to
// an agent without --token-file (the auth call is a no-op there), so
// tokens can be handed out before the agents require them.
func TestTokenBeforeTheServersRequireIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	a := startLoneAgent(t, bin)
	wantCode(t, runCLI(t, bin, nil, "status", "--servers", a.httpAddr, "--wait", "30s"), exitOK)
	wantCode(t, runCLI(t, bin, nil, "limits", "put", "api", "--algorithm", "strict", "--rate", "10", "--per", "1s", "--expiry", "1s", "--servers", a.httpAddr), exitOK)
	secret, _ := newToken(t, bin, "--role", "client", "--name", "app")
	c, err := client.New([]string{a.httpAddr}, client.WithToken(secret), client.WithBinaryReserves(1), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if g, err := c.Reserve(ctx, "api", 1, time.Second); err != nil || !g.Granted {
		t.Fatalf("binary reserve with a token the agent does not require: %+v %v", g, err)
	}
}

// TestSidecarTLSAndTokens: a worker sidecar on 0.0.0.0 with
// --http-tls-cert, --http-tls-key and --http-token-file (without them it
// refuses to start there) serves health checks to anyone, a reserve only
// with a client token, and its status only with a token; the test hooks
// need admin; the worker itself reaches the register with a worker token
// over TLS.
func TestSidecarTLSAndTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "n1,side", "--clients", "x"), exitOK)
	rootSecret, rootLine := newToken(t, bin, "--role", "admin", "--name", "root")
	appSecret, appLine := newToken(t, bin, "--role", "client", "--name", "app", "--limits", "lk")
	workerSecret, workerLine := newToken(t, bin, "--role", "worker", "--name", "w1")
	if err := os.WriteFile(file("tokens"), []byte(rootLine+"\n"+appLine+"\n"+workerLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startLoneAgent(t, bin, "--tls-cert", file("node-n1.crt"), "--tls-key", file("node-n1.key"), "--tls-ca", file("ca.crt"), "--token-file", file("tokens"))
	admin := []string{"PERMITD_TOKEN=" + rootSecret}
	cl := func(args ...string) cliResult {
		return runCLI(t, bin, admin, append(args, "--servers", a.httpAddr, "--tls-ca", file("ca.crt"))...)
	}
	wantCode(t, cl("status", "--wait", "30s"), exitOK)
	wantCode(t, cl("limits", "put", "lk", "--algorithm", "strict", "--rate", "100", "--per", "1s"), exitOK)
	wantCode(t, cl("limits", "lease-policy", "lk", "--leased=true"), exitOK)

	ports := freePorts(t, 2)
	sidecarPort := ports[1]
	workerArgs := []string{"worker", "--group", "g", "--name", "w1", "--limit", "lk", "--servers", a.httpAddr,
		"--tls-ca", file("ca.crt"), "--gossip-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http-addr", fmt.Sprintf("0.0.0.0:%d", sidecarPort)}
	if r := runCLI(t, bin, nil, append(workerArgs, "--validate")...); r.code != exitUsage || !strings.Contains(r.stderr, "--http-token-file") {
		t.Errorf("a sidecar on 0.0.0.0 without TLS and tokens: exit %d, %s", r.code, r.stderr)
	}
	w := &testAgent{id: "worker"}
	w.start(t, bin, []string{"PERMITD_TOKEN=" + workerSecret}, append(workerArgs,
		"--http-tls-cert", file("node-side.crt"), "--http-tls-key", file("node-side.key"), "--http-token-file", file("tokens"), "--test-hooks", "--insecure")...)
	t.Cleanup(func() { w.signal(t, syscall.SIGKILL) })

	roots, err := tlsfiles.Roots(file("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", sidecarPort)
	call := func(method, path, secret, body string) int {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitUntil(t, 20*time.Second, "the sidecar's health over TLS", func() bool { return call("GET", "/healthz", "", "") == 200 })
	waitUntil(t, 20*time.Second, "a reserve with the client token", func() bool {
		return call("POST", "/v1/limits/lk/reserve", appSecret, `{"permits":1,"max_wait":"1s"}`) == 200
	})
	for _, tc := range []struct {
		name, method, path, secret string
		want                       int
	}{
		{"reserve without a token", "POST", "/v1/limits/lk/reserve", "", 401},
		{"reserve with the worker token", "POST", "/v1/limits/lk/reserve", workerSecret, 403},
		{"status without a token", "GET", "/v1/status", "", 401},
		{"status with the client token", "GET", "/v1/status", appSecret, 200},
		{"test hooks with the client token", "POST", "/v1/debug/faults", appSecret, 403},
	} {
		if got := call(tc.method, tc.path, tc.secret, `{}`); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if !strings.Contains(w.log.String(), "tls=true tokens=true") {
		t.Errorf("the worker did not log TLS and tokens on:\n%s", w.log.String())
	}
	// A reload without the client token revokes it at once.
	if err := os.WriteFile(file("tokens"), []byte(rootLine+"\n"+workerLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, 10*time.Second, "the sidecar's reload", func() bool { return strings.Contains(w.log.String(), "tokens reloaded") })
	if got := call("POST", "/v1/limits/lk/reserve", appSecret, `{"permits":1}`); got != 401 {
		t.Errorf("reserve with the revoked client token: %d, want 401", got)
	}
}
