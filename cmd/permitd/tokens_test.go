package main

import (
	"bytes"
	"strings"
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
