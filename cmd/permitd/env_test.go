package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// clientEnvCmdLine is a command with the cluster client's flags.
func clientEnvCmdLine() (*cmdLine, *clientFlags, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	c := newCmdLine("t", "t", "", &stdout, &stderr)
	var cf clientFlags
	cf.define(c)
	return c, &cf, &stderr
}

// TestClientFlagsFromEnvironment: each client flag is, in order of
// precedence, the command line's, else its variable's (not empty), else
// the default.
func TestClientFlagsFromEnvironment(t *testing.T) {
	get := map[string]func(*clientFlags) string{
		"servers":  func(f *clientFlags) string { return f.servers },
		"tls-ca":   func(f *clientFlags) string { return f.tls.ca },
		"tls-cert": func(f *clientFlags) string { return f.tls.cert },
		"tls-key":  func(f *clientFlags) string { return f.tls.key },
	}
	vars := map[string]string{"servers": "PERMITD_SERVERS", "tls-ca": "PERMITD_TLS_CA", "tls-cert": "PERMITD_TLS_CERT", "tls-key": "PERMITD_TLS_KEY"}
	defaults := map[string]string{"servers": "127.0.0.1:8001"}
	values := map[string][2]string{ // flag's value, variable's value
		"servers":  {"10.0.0.1:8001,10.0.0.2:8001", "h1:9001, https://h2:9002"},
		"tls-ca":   {"flag-ca.crt", "env-ca.crt"},
		"tls-cert": {"flag.crt", "env.crt"},
		"tls-key":  {"flag.key", "env.key"},
	}
	for name, key := range vars {
		for _, tc := range []struct {
			desc      string
			flag, env string
			setEnv    bool
			want      string
		}{
			{desc: "default", want: defaults[name]},
			{desc: "empty variable", setEnv: true, env: " ", want: defaults[name]},
			{desc: "variable", setEnv: true, env: values[name][1], want: values[name][1]},
			{desc: "flag", flag: values[name][0], want: values[name][0]},
			{desc: "flag over variable", flag: values[name][0], setEnv: true, env: values[name][1], want: values[name][0]},
		} {
			t.Run(name+"/"+tc.desc, func(t *testing.T) {
				for _, k := range vars {
					t.Setenv(k, "")
				}
				if tc.setEnv {
					t.Setenv(key, tc.env)
				}
				c, cf, stderr := clientEnvCmdLine()
				var args []string
				if tc.flag != "" {
					args = []string{"--" + name, tc.flag}
				}
				if ok, code := c.parse(args); !ok {
					t.Fatalf("parse %q with %s=%q: exit %d: %s", args, key, tc.env, code, stderr)
				}
				if got := get[name](cf); got != tc.want {
					t.Errorf("--%s %q, %s=%q: got %q, want %q", name, tc.flag, key, tc.env, got, tc.want)
				}
			})
		}
	}
}

// TestBadServersVariable: a PERMITD_SERVERS the flag would reject is a
// usage error naming the variable, with the flag's own explanation.
func TestBadServersVariable(t *testing.T) {
	for _, bad := range []string{"not a server", "h1:1,ftp://h2:2"} {
		t.Setenv("PERMITD_SERVERS", "")
		c, _, flagStderr := clientEnvCmdLine()
		if ok, code := c.parse([]string{"--servers", bad}); ok || code != exitUsage {
			t.Fatalf("--servers %q accepted (exit %d)", bad, code)
		}
		flagMsg := strings.TrimSpace(flagStderr.String())
		_, why, found := strings.Cut(flagMsg, "--servers ")
		if !found {
			t.Fatalf("--servers %q: the flag's error does not name it: %s", bad, flagMsg)
		}

		t.Setenv("PERMITD_SERVERS", bad)
		c, _, stderr := clientEnvCmdLine()
		if ok, code := c.parse(nil); ok || code != exitUsage {
			t.Fatalf("PERMITD_SERVERS=%q accepted (exit %d)", bad, code)
		}
		want := "environment variable PERMITD_SERVERS (for --servers): " + why
		if got := strings.TrimSpace(stderr.String()); !strings.Contains(got, want) {
			t.Errorf("PERMITD_SERVERS=%q:\n got %s\nwant it to contain %s", bad, got, want)
		}
		// The command line wins: a good flag hides a bad variable.
		c, _, stderr = clientEnvCmdLine()
		if ok, code := c.parse([]string{"--servers", "h:1"}); !ok {
			t.Errorf("--servers h:1 with PERMITD_SERVERS=%q: exit %d: %s", bad, code, stderr)
		}
	}
}

// TestEveryClientCommandReadsServersVariable: each command that talks to
// a cluster sends its request to PERMITD_SERVERS when --servers is not
// given, and to --servers when it is.
func TestEveryClientCommandReadsServersVariable(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid: test server"}`))
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid: other server"}`))
	}))
	defer other.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"status"},
		{"limits", "list"},
		{"limits", "get", "api"},
		{"limits", "put", "api", "--algorithm", "strict", "--rate", "1"},
		{"limits", "delete", "api"},
		{"limits", "lease-policy", "api", "--leased=true"},
		{"cluster", "show"},
		{"cluster", "join", "n4", "127.0.0.1:7004"},
		{"cluster", "remove", "n4"},
		{"cluster", "transfer"},
		{"reserve", "api"},
		{"settle", "42", "api=1"},
		{"release", "42"},
		{"snapshot", "save", filepath.Join(dir, "snap")},
	} {
		t.Setenv("PERMITD_SERVERS", addr)
		before := hits.Load()
		var stdout, stderr bytes.Buffer
		run(append(append([]string(nil), args...), "--timeout", "5s"), &stdout, &stderr)
		if hits.Load() == before {
			t.Errorf("%q with PERMITD_SERVERS=%s: no request reached it; stderr: %s", args, addr, stderr.String())
		}
		before = hits.Load()
		stderr.Reset()
		run(append(append([]string(nil), args...), "--timeout", "5s", "--servers", strings.TrimPrefix(other.URL, "http://")), &stdout, &stderr)
		if hits.Load() != before {
			t.Errorf("%q with --servers and PERMITD_SERVERS: the variable won over the flag", args)
		}
	}
}

// TestServersFlagHelpNamesVariable: --help of every client command names
// the variables of its client flags.
func TestServersFlagHelpNamesVariable(t *testing.T) {
	for _, args := range [][]string{
		{"status"}, {"limits", "list"}, {"cluster", "show"}, {"reserve"}, {"snapshot", "save"},
		{"settle"}, {"worker"}, {"relay"}, {"bench"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(append([]string(nil), args...), "--help"), &stdout, &stderr); code != exitOK {
			t.Fatalf("%q --help: exit %d: %s", args, code, stderr.String())
		}
		for _, v := range []string{"PERMITD_SERVERS", "PERMITD_TLS_CA", "PERMITD_TLS_CERT", "PERMITD_TLS_KEY"} {
			if !strings.Contains(stdout.String(), "(env $"+v+")") {
				t.Errorf("%q --help does not name %s", args, v)
			}
		}
	}
}

// TestTLSVariableErrorsNameVariable: an error about TLS files that came
// from the environment says which variable set them; the same error from
// the flags does not mention the environment.
func TestTLSVariableErrorsNameVariable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing-ca.crt")
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string // "" for none
	}{
		{env: map[string]string{"PERMITD_TLS_CA": missing}, want: "(--tls-ca from $PERMITD_TLS_CA)"},
		{env: map[string]string{"PERMITD_TLS_CERT": "c.crt"}, want: "(--tls-cert from $PERMITD_TLS_CERT)"},
		{args: []string{"--tls-ca", missing}},
	} {
		for _, cmd := range [][]string{{"status"}, {"limits", "list"}, {"reserve", "api"}} {
			for _, k := range []string{"PERMITD_TLS_CA", "PERMITD_TLS_CERT", "PERMITD_TLS_KEY", "PERMITD_SERVERS"} {
				t.Setenv(k, tc.env[k])
			}
			var stdout, stderr bytes.Buffer
			args := append(append([]string(nil), cmd...), tc.args...)
			if code := run(args, &stdout, &stderr); code != exitUsage {
				t.Fatalf("%q with %v: exit %d, want %d: %s", args, tc.env, code, exitUsage, stderr.String())
			}
			got := stderr.String()
			if tc.want == "" && strings.Contains(got, "from $") {
				t.Errorf("%q: names a variable though none was set: %s", args, got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("%q with %v: %q does not say %q", args, tc.env, got, tc.want)
			}
		}
	}
}
