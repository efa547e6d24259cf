package auth

import (
	"errors"
	"strings"
	"testing"
)

func mustSecret(t *testing.T, name string, role Role, limits ...string) (string, string) {
	t.Helper()
	secret, line, err := NewSecret(name, role, limits)
	if err != nil {
		t.Fatal(err)
	}
	return secret, line
}

// TestTokenFileRoundTrip: the lines NewSecret prints parse into tokens
// that Lookup finds by their secrets, with their roles and patterns; a
// secret not in the file, or one character off, is not found; the file
// holds no secret.
func TestTokenFileRoundTrip(t *testing.T) {
	adminSecret, adminLine := mustSecret(t, "ops", RoleAdmin)
	clientSecret, clientLine := mustSecret(t, "billing", RoleClient, "billing-*", "shared")
	workerSecret, workerLine := mustSecret(t, "fleet", RoleWorker)
	otherSecret, _ := mustSecret(t, "other", RoleAdmin)
	file := "# permitd tokens\n\n" + adminLine + "\n  " + clientLine + "  \n" + workerLine + "\n"
	for _, s := range []string{adminSecret, clientSecret, workerSecret} {
		if strings.Contains(file, s) || !strings.HasPrefix(s, "pmt_") || len(s) != 4+43 {
			t.Fatalf("secret %q: in the file, or not pmt_ and 43 characters", s)
		}
	}
	ts, err := ParseTokenFile(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if ts.Len() != 3 {
		t.Fatalf("%d tokens, want 3", ts.Len())
	}
	for _, tc := range []struct {
		secret string
		name   string
		role   Role
	}{{adminSecret, "ops", RoleAdmin}, {clientSecret, "billing", RoleClient}, {workerSecret, "fleet", RoleWorker}} {
		tok, ok := ts.Lookup(tc.secret)
		if !ok || tok.Name != tc.name || tok.Role != tc.role {
			t.Errorf("Lookup(%s's secret) = %+v %v", tc.name, tok, ok)
		}
	}
	tok, _ := ts.Lookup(clientSecret)
	for limit, want := range map[string]bool{"billing-eu": true, "shared": true, "api": false, "billing": false} {
		if tok.MayUse(limit) != want {
			t.Errorf("client token MayUse(%q) = %v, want %v", limit, !want, want)
		}
	}
	if admin, _ := ts.Lookup(adminSecret); !admin.MayUse("anything") {
		t.Errorf("admin token may not use a limit")
	}
	for _, s := range []string{otherSecret, "", adminSecret[:len(adminSecret)-1], adminSecret + "x"} {
		if tok, ok := ts.Lookup(s); ok {
			t.Errorf("Lookup(%q) found %+v", s, tok)
		}
	}
}

// TestTokenFileRejections: every broken file is rejected whole, with its
// line number and what is allowed, without repeating a hash.
func TestTokenFileRejections(t *testing.T) {
	_, good := mustSecret(t, "a", RoleAdmin)
	hash := strings.Fields(good)[2]
	tests := []struct {
		name, file, mention string
	}{
		{"too few fields", "a admin", "line 1: 2 fields"},
		{"unknown role", "a root " + hash, "line 1: role \"root\": allowed: admin, client, worker"},
		{"bad name", "a/b admin " + hash, "line 1: name \"a/b\""},
		{"bad hash", "a admin sha256:xyz", "line 1: hash: allowed"},
		{"uppercase hash", "a admin " + strings.ToUpper(hash), "line 1: hash: allowed"},
		{"md5", "a admin md5:" + strings.TrimPrefix(hash, "sha256:"), "line 1: hash: allowed"},
		{"limits on admin", "a admin " + hash + " limits=x", "limits= on a admin token"},
		{"bad pattern", "a client " + hash + " limits=[", "limit pattern \"[\""},
		{"empty pattern", "a client " + hash + " limits=x,", "limit pattern \"\""},
		{"unknown field", "a client " + hash + " scope=x", "fourth field"},
		{"duplicate name", good + "\n# c\n" + "a worker sha256:" + strings.Repeat("1", 64), "line 3: name \"a\" is already on line 1"},
		{"duplicate hash", good + "\nb worker " + hash, "line 2: the same secret's hash is already on line 1"},
		{"long line", strings.Repeat("x", 5000), "longer than 4096 bytes"},
		{"a secret pasted in", "a admin pmt_abcdefghijklmnop", "field 3 looks like a secret"},
		{"over 1 MiB with CRLF lines", strings.Repeat("# "+strings.Repeat("x", 97)+"\r\n", MaxTokenFileBytes/101+1), "larger than 1048576 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokenFile(strings.NewReader(tc.file))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("ParseTokenFile: %v, want ErrInvalid mentioning %q", err, tc.mention)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(hash, "sha256:")) || strings.Contains(err.Error(), "pmt_abc") {
				t.Errorf("the error repeats a hash or a secret: %v", err)
			}
		})
	}
	if _, _, err := NewSecret("bad name", RoleAdmin, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewSecret with a bad name: %v", err)
	}
	if _, _, err := NewSecret("c", RoleClient, []string{"a b"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "without spaces or commas") {
		t.Errorf("NewSecret with a pattern holding a space: %v", err)
	}
	if _, _, err := NewSecret("w", RoleWorker, []string{"x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewSecret of a worker token with limits: %v", err)
	}
}

// TestParseAuthorization: "Bearer SECRET" (any case of the scheme) gives
// the secret; everything else an error that never repeats the credential.
func TestParseAuthorization(t *testing.T) {
	secret := "pmt_abc-DEF_123"
	for _, v := range []string{"Bearer " + secret, "bearer " + secret, "BEARER " + secret} {
		if got, err := ParseAuthorization(v); err != nil || got != secret {
			t.Errorf("ParseAuthorization(%q) = %q, %v", v, got, err)
		}
	}
	for _, tc := range []struct{ value, mention string }{
		{"", "no Authorization header"},
		{"Basic " + secret, "scheme is not Bearer"},
		{secret, "scheme is not Bearer"},
		{"Bearer ", "without a token"},
		{"Bearer " + secret + " extra", "characters outside"},
		{"Bearer " + secret + "\x00", "characters outside"},
		{"Bearer " + strings.Repeat("a", MaxSecretBytes+1), "at most 256"},
	} {
		_, err := ParseAuthorization(tc.value)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseAuthorization(%q): %v, want ErrInvalid mentioning %q", tc.value, err, tc.mention)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error repeats the credential: %v", err)
		}
	}
}

// TestNewTokenStoreOf: every spec's secret finds its token with its role and
// limits; an invalid name fails with ErrInvalid and makes no store.
func TestNewTokenStoreOf(t *testing.T) {
	store, secrets, err := NewTokenStoreOf(Spec{Name: "root", Role: RoleAdmin}, Spec{Name: "app", Role: RoleClient, Limits: []string{"api*"}})
	if err != nil {
		t.Fatal(err)
	}
	if store.Len() != 2 || len(secrets) != 2 {
		t.Fatalf("%d tokens, %d secrets; want 2 and 2", store.Len(), len(secrets))
	}
	if tok, ok := store.Lookup(secrets["app"]); !ok || tok.Name != "app" || tok.Role != RoleClient || !tok.MayUse("api-x") || tok.MayUse("other") {
		t.Errorf("app: %+v, %v", tok, ok)
	}
	if tok, ok := store.Lookup(secrets["root"]); !ok || tok.Role != RoleAdmin {
		t.Errorf("root: %+v, %v", tok, ok)
	}
	if s, _, err := NewTokenStoreOf(Spec{Name: "bad name", Role: RoleAdmin}); !errors.Is(err, ErrInvalid) || s != nil {
		t.Errorf("a bad name: store %v, error %v; want ErrInvalid and no store", s, err)
	}
}
