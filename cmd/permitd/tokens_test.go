package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/permitd/permitd/transport/auth"
)

// TestTokensCreate: "permitd tokens create" prints a secret and a token
// file line that parses into a token found by that secret (with its role
// and patterns), holding no secret itself; bad flags are usage errors.
func TestTokensCreate(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"tokens", "create", "--role", "client", "--name", "billing", "--limits", "billing-*,shared"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	secret, okS := strings.CutPrefix(lines[0], "secret: ")
	line, okL := strings.CutPrefix(lines[len(lines)-1], "token file line: ")
	if len(lines) != 2 || !okS || !okL || strings.Contains(line, secret) {
		t.Fatalf("output %q", stdout.String())
	}
	ts, err := auth.ParseTokenFile(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := ts.Lookup(secret)
	if !ok || tok.Name != "billing" || tok.Role != auth.RoleClient || !tok.MayUse("billing-eu") || tok.MayUse("api") {
		t.Fatalf("the printed line gives %+v %v", tok, ok)
	}
	for _, tc := range []struct {
		args    []string
		mention string
	}{
		{[]string{"tokens", "create", "--name", "x"}, "--role and --name are required"},
		{[]string{"tokens", "create", "--role", "root", "--name", "x"}, "allowed: admin, client or worker"},
		{[]string{"tokens", "create", "--role", "admin", "--name", "a b"}, "allowed: 1-63 letters"},
		{[]string{"tokens", "create", "--role", "worker", "--name", "w", "--limits", "x"}, "client tokens only"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.mention) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", tc.args, code, out.String(), errOut.String(), tc.mention)
		}
	}
}

// TestTokensCreateTokenFile: with --token-file, "permitd tokens create"
// prints only the secret and writes its line into the file (created 0600
// with its folder); run again with the same --name it replaces that line
// (the old secret no longer found, the new one is) and keeps every other
// line and comment; an invalid file is refused naming the line and left
// unchanged.
func TestTokensCreateTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secure", "tokens")
	create := func(name string, extra ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"tokens", "create", "--role", "client", "--name", name, "--token-file", file}, extra...)
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		secret := stdout.String()
		if !strings.HasPrefix(secret, "pmt_") || strings.Count(secret, "\n") != 1 || !strings.HasSuffix(secret, "\n") {
			t.Fatalf("stdout %q, want only the secret on one line", secret)
		}
		if !strings.Contains(stderr.String(), "SIGHUP") {
			t.Errorf("stderr %q does not say that agents re-read the file on SIGHUP", stderr.String())
		}
		return strings.TrimSpace(secret)
	}
	parse := func() (*auth.Tokens, string) {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := auth.ParseTokenFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return ts, string(b)
	}
	app1 := create("app", "--limits", "api*")
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	first, _ := os.ReadFile(file)
	if err := os.WriteFile(file, append([]byte("# tokens of the walkthrough\n\n"), first...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil { // an operator's choice, kept
		t.Fatal(err)
	}
	ops := create("ops")
	app2 := create("app", "--limits", "api*")
	ts, text := parse()
	if _, ok := ts.Lookup(app1); ok {
		t.Errorf("the rotated secret of app still works:\n%s", text)
	}
	if tok, ok := ts.Lookup(app2); !ok || tok.Name != "app" || !tok.MayUse("api-eu") || tok.MayUse("db") {
		t.Errorf("the new secret of app gives %+v %v:\n%s", tok, ok, text)
	}
	if _, ok := ts.Lookup(ops); !ok || ts.Len() != 2 || strings.Count(text, "\napp ") != 1 || !strings.HasPrefix(text, "# tokens of the walkthrough\n\n") {
		t.Errorf("want the comment, one app line and the ops line:\n%s", text)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode changed to %v", st.Mode().Perm())
	}
	broken := text + "oops\n"
	if err := os.WriteFile(file, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"tokens", "create", "--role", "admin", "--name", "x", "--token-file", file}, &stdout, &stderr)
	if code != exitUsage || stdout.Len() != 0 || !strings.Contains(stderr.String(), "line 5") || !strings.Contains(stderr.String(), "unchanged") {
		t.Errorf("a broken file: exit %d, stdout %q, stderr %q; want exit 2 naming line 5", code, stdout.String(), stderr.String())
	}
	if after, _ := os.ReadFile(file); string(after) != broken {
		t.Errorf("the broken file was changed")
	}
}

// TestTokenFileKeepsItsOwner: replacing a line keeps the token file's
// owner and group (an agent reading a root:permitd 0640 file through its
// group must still read it after a rotation by root). Needs root to give
// the file another owner.
func TestTokenFileKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown the token file")
	}
	path := filepath.Join(t.TempDir(), "tokens")
	_, line, err := auth.NewSecret("app", auth.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setTokenLine(path, line); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 12345, 23456
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	_, line, err = auth.NewSecret("app", auth.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if replaced, err := setTokenLine(path, line); err != nil || !replaced {
		t.Fatalf("rotation: replaced %v, %v", replaced, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != uid || sys.Gid != gid || st.Mode().Perm() != 0o640 {
		t.Errorf("after the rotation: owner %d:%d mode %o, want %d:%d 640", sys.Uid, sys.Gid, st.Mode().Perm(), uid, gid)
	}
}
