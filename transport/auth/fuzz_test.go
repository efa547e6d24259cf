package auth

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseTokenFile: no input panics; every rejection is ErrInvalid
// (the reader never fails here) and repeats no field that starts like a
// secret; every accepted token has a known role, and patterns only on a
// client token.
func FuzzParseTokenFile(f *testing.F) {
	_, line, _ := NewSecret("ops", RoleAdmin, nil)
	_, cline, _ := NewSecret("c", RoleClient, []string{"api-*"})
	f.Add(line + "\n" + cline + "\n")
	f.Add("# only a comment\n\n")
	f.Add("a admin sha256:" + strings.Repeat("0", 64))
	f.Add("a client sha256:" + strings.Repeat("f", 64) + " limits=[a-")
	f.Fuzz(func(t *testing.T, file string) {
		ts, err := ParseTokenFile(strings.NewReader(file))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection not ErrInvalid: %v", err)
			}
			for _, field := range strings.Fields(file) {
				if strings.HasPrefix(field, secretPrefix) && len(field) > len(secretPrefix) && strings.Contains(err.Error(), field) {
					t.Fatalf("the error repeats a secret-like field %q: %v", field, err)
				}
			}
			return
		}
		for _, tok := range ts.list {
			if tok.Role != RoleAdmin && tok.Role != RoleClient && tok.Role != RoleWorker {
				t.Fatalf("accepted role %q", tok.Role)
			}
			if len(tok.Limits) > 0 && tok.Role != RoleClient {
				t.Fatalf("accepted limits on a %s token", tok.Role)
			}
		}
	})
}

// FuzzParseAuthorization: no input panics; an accepted value gives a
// non-empty secret of allowed characters that is the value's suffix; a
// rejection is ErrInvalid and never repeats the value's credential.
func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer pmt_x", "bearer a=", "Basic x", "", "Bearer ", "Bearer a b", "Bearer \xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		secret, err := ParseAuthorization(value)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection not ErrInvalid: %v", err)
			}
			if _, cred, ok := strings.Cut(value, " "); ok && len(cred) >= 8 && strings.Contains(err.Error(), cred) {
				t.Fatalf("the error repeats the credential: %v", err)
			}
			return
		}
		if secret == "" || len(secret) > MaxSecretBytes || !strings.HasSuffix(value, secret) || !b64token.MatchString(secret) {
			t.Fatalf("ParseAuthorization(%q) = %q", value, secret)
		}
	})
}
