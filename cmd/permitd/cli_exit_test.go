package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpListsDeniedExitCode: every command and subcommand that exits 4
// (exitDenied) when the server refuses the credentials lists code 4 in
// its help, one that does not exit 4 does not list it, and permitd --help
// lists it: help and behaviour agree, for every command there is.
func TestHelpListsDeniedExitCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="permitd"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"error":"auth: missing token: send \"Authorization: Bearer TOKEN\"","required_role":"admin"}`)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	// calls are the commands that call the HTTP API, with the arguments
	// each needs besides --servers.
	calls := map[string][]string{
		"limits put":          {"api", "--algorithm", "strict", "--rate", "10"},
		"limits get":          {"api"},
		"limits list":         nil,
		"limits delete":       {"api"},
		"limits lease-policy": {"api", "--leased=true"},
		"cluster show":        nil,
		"cluster join":        {"n4", "127.0.0.1:7004"},
		"cluster remove":      {"n3"},
		"cluster transfer":    nil,
		"snapshot save":       {filepath.Join(t.TempDir(), "snap")},
		"reserve":             {"api"},
		"settle":              {"42"},
		"release":             {"42"},
		"status":              nil,
		"templates put":       {"cust", "--algorithm", "strict", "--rate", "1", "--idle", "1m", "--max-keys", "1"},
		"templates get":       {"cust"},
		"templates list":      nil,
		"templates delete":    {"cust"},
	}
	// local are the commands that make no call with the client flags
	// (they run a process, or work on local files), so never exit 4.
	local := map[string]bool{"agent": true, "bench": true, "certs create": true, "completion": true, "demo": true, "relay": true,
		"snapshot restore": true, "tokens create": true, "version": true, "worker": true}
	groups := map[string][]subcommand{"limits": limitsSubcommands, "cluster": clusterSubcommands,
		"snapshot": snapshotSubcommands, "certs": certsSubcommands, "tokens": tokensSubcommands, "templates": templatesSubcommands}
	var all []string
	for _, n := range commandNames() {
		if subs, ok := groups[n]; ok {
			for _, s := range subs {
				all = append(all, n+" "+s.name)
			}
			continue
		}
		all = append(all, n)
	}
	for _, name := range all {
		args, call := calls[name]
		if !call && !local[name] {
			t.Errorf("%s: neither in calls nor in local: say whether it can exit %d", name, exitDenied)
			continue
		}
		var help, stderr bytes.Buffer
		if code := run(append(strings.Fields(name), "--help"), &help, &stderr); code != exitOK {
			t.Fatalf("%s --help: exit %d: %s", name, code, stderr.String())
		}
		lists := strings.Contains(help.String(), exitDeniedText)
		if !call {
			if lists {
				t.Errorf("%s --help lists exit %d, which it never exits with", name, exitDenied)
			}
			continue
		}
		stderr.Reset()
		code := run(append(append(strings.Fields(name), args...), "--servers", addr, "--timeout", "5s"), &bytes.Buffer{}, &stderr)
		if code == exitDenied && !strings.Contains(stderr.String(), "missing token: give --token or $PERMITD_TOKEN") {
			t.Errorf("%s: a missing token's error does not name --token and $PERMITD_TOKEN: %s", name, stderr.String())
		}
		if (code == exitDenied) != lists {
			t.Errorf("%s: exit %d on a 401 (%s), and its help lists exit %d: %v; want both or neither:\n%s",
				name, code, strings.TrimSpace(stderr.String()), exitDenied, lists, help.String())
		}
	}
	var usage bytes.Buffer
	if run([]string{"--help"}, &usage, &bytes.Buffer{}); !strings.Contains(usage.String(), exitDeniedText) {
		t.Errorf("permitd --help does not list exit %d:\n%s", exitDenied, usage.String())
	}
}

// TestExitStatusCodesNotSplit: in every help's exit status paragraph, a
// code is not cut from its words at a line's end ("2 usage\nerror",
// "3 reserve\nrefused;"): each reads as one item.
func TestExitStatusCodesNotSplit(t *testing.T) {
	split := regexp.MustCompile(`(^|[;:] )[0-9] [^ \n]*\n`)
	helps := map[string]string{}
	var usage bytes.Buffer
	run([]string{"--help"}, &usage, &bytes.Buffer{})
	helps["permitd"] = usage.String()
	groups := map[string][]subcommand{"limits": limitsSubcommands, "cluster": clusterSubcommands,
		"snapshot": snapshotSubcommands, "certs": certsSubcommands, "tokens": tokensSubcommands, "templates": templatesSubcommands}
	var all []string
	for _, n := range commandNames() {
		all = append(all, n)
		for _, s := range groups[n] {
			all = append(all, n+" "+s.name)
		}
	}
	for _, name := range all {
		var help bytes.Buffer
		run(append(strings.Fields(name), "--help"), &help, &bytes.Buffer{})
		helps[name] = help.String()
	}
	for name, help := range helps {
		_, para, ok := strings.Cut(help, "Exit status:")
		if !ok {
			continue
		}
		para, _, _ = strings.Cut(para, "\n\n")
		for _, line := range strings.Split(" "+strings.TrimSpace(para)+"\n", "\n") {
			if m := split.FindString(line + "\n"); m != "" {
				t.Errorf("%s --help: exit status code cut from its words at %q:\n%s", name, m, para)
			}
		}
	}
}
