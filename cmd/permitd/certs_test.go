package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCertsCreate: "permitd certs create" writes the CA, the nodes' and
// the clients' files into a nested folder and lists them as made; run
// again with the same arguments it keeps every file, lists them as kept
// and exits 0; a node added later is made beside the kept ones; an
// existing file that does not fit (a host it does not cover) fails
// (exit 1) naming the file, the problem and the fix, and writes nothing;
// bad flags are usage errors (exit 2) that say what is allowed, and
// create no folder.
func TestCertsCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secure", "certs")
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
		if !strings.Contains(out, "made "+filepath.Join(dir, f)+"\n") {
			t.Errorf("output does not list %s:\n%s", f, out)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	first, err := os.ReadFile(filepath.Join(dir, "node-n1.crt"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI("certs", "create", "--out", dir, "--nodes", "n1,n2", "--hosts", "127.0.0.1,localhost", "--clients", "admin")
	if code != exitOK || strings.Contains(out, "made ") || errOut != "" {
		t.Errorf("the same create again: exit %d, stdout %q, stderr %q; want exit 0, every file kept", code, out, errOut)
	}
	for _, f := range []string{"ca.crt", "ca.key", "node-n1.crt", "node-n1.key", "node-n2.crt", "node-n2.key", "client-admin.crt", "client-admin.key"} {
		if !strings.Contains(out, "kept "+filepath.Join(dir, f)+"\n") {
			t.Errorf("the second run does not list %s as kept:\n%s", f, out)
		}
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "node-n1.crt")); !bytes.Equal(first, again) {
		t.Errorf("the second run replaced node-n1.crt")
	}
	code, out, errOut = runCLI("certs", "create", "--out", dir, "--nodes", "n3,n1", "--hosts", "127.0.0.1,localhost,db.example")
	n1 := filepath.Join(dir, "node-n1.crt")
	if code != exitFailure || out != "" || !strings.Contains(errOut, n1+" does not cover host db.example") ||
		!strings.Contains(errOut, "delete "+n1+" and "+filepath.Join(dir, "node-n1.key")) || !strings.Contains(errOut, "choose another --out (nothing was written)") {
		t.Errorf("create with a host n1 lacks: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-n3.crt")); !os.IsNotExist(err) {
		t.Errorf("node-n3.crt written by a refused run")
	}
	code, out, _ = runCLI("certs", "create", "--out", dir, "--nodes", "n3,n1")
	if code != exitOK || !strings.Contains(out, "kept "+filepath.Join(dir, "ca.crt")) || !strings.Contains(out, "kept "+n1) ||
		!strings.Contains(out, "made "+filepath.Join(dir, "node-n3.crt")) {
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
