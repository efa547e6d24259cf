package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCertsCreate: "permitd certs create" writes the CA, the nodes' and
// the clients' files and lists them; a second run for an existing node
// fails (exit 1) naming the file and writes nothing; bad flags are usage
// errors (exit 2) that say what is allowed, and create no folder.
func TestCertsCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	runCLI := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := runCLI("certs", "create", "--out", dir, "--nodes", "n1,n2", "--hosts", "127.0.0.1,localhost", "--clients", "admin")
	if code != exitOK {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	for _, f := range []string{"ca.crt", "ca.key", "node-n1.crt", "node-n1.key", "node-n2.crt", "node-n2.key", "client-admin.crt", "client-admin.key"} {
		if !strings.Contains(out, "wrote "+filepath.Join(dir, f)+"\n") {
			t.Errorf("output does not list %s:\n%s", f, out)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	code, out, errOut = runCLI("certs", "create", "--out", dir, "--nodes", "n3,n1")
	if code != exitFailure || !strings.Contains(errOut, "node-n1.crt") || !strings.Contains(errOut, "nothing was written") || out != "" {
		t.Errorf("create over an existing node: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-n3.crt")); !os.IsNotExist(err) {
		t.Errorf("node-n3.crt written by a refused run")
	}
	code, out, _ = runCLI("certs", "create", "--out", dir, "--nodes", "n3")
	if code != exitOK || !strings.Contains(out, "reused "+filepath.Join(dir, "ca.crt")) {
		t.Errorf("adding a node: exit %d, %q", code, out)
	}
	never := filepath.Join(t.TempDir(), "never")
	for _, tc := range []struct {
		args    []string
		mention string
	}{
		{[]string{"certs", "create", "--nodes", "n1"}, "--out is required"},
		{[]string{"certs", "create", "--out", never}, "no node and no client"},
		{[]string{"certs", "create", "--out", never, "--nodes", "a/b"}, "allowed: 1-63 letters"},
		{[]string{"certs", "create", "--out", never, "--nodes", "n1", "--hosts", "bad host"}, "an IP address or a DNS name"},
		{[]string{"certs", "create", "--out", never, "--clients", "c", "--days", "0"}, "allowed: 1-3650"},
		{[]string{"certs"}, "missing subcommand"},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.mention) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 mentioning %q on one line", tc.args, code, errOut, tc.mention)
		}
	}
	if _, err := os.Stat(never); !os.IsNotExist(err) {
		t.Errorf("a usage error created the output folder")
	}
}
