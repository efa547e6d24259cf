package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequireRejectionPrefix: every Authorization value Require rejects
// before looking the token up answers an error with one "auth: " prefix,
// and a token file's hash (sha256:...) sent as the token is named as such
// with what is allowed instead.
func TestRequireRejectionPrefix(t *testing.T) {
	store, _, err := NewTokenStoreOf(Spec{Name: "a", Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	h := Require(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), store,
		func(string, string) (Need, string) { return NeedAdmin, "" })
	for _, tc := range []struct{ value, mention string }{
		{"Basic x", "scheme is not Bearer"},
		{"Bearer ", "without a token"},
		{"Bearer " + strings.Repeat("a", MaxSecretBytes+1), "at most 256"},
		{"Bearer a b", "allowed: the secret (pmt_...)"},
		{"Bearer sha256:" + strings.Repeat("0", 64), "is a token file's hash (sha256:...): allowed: the secret (pmt_...)"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/v1/limits", nil)
		req.Header.Set("Authorization", tc.value)
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusUnauthorized || strings.Count(body, "auth: ") != 1 || !strings.Contains(body, tc.mention) {
			t.Errorf("Authorization %q: %d %s; want 401 with one \"auth: \" prefix mentioning %q", tc.value, rec.Code, body, tc.mention)
		}
	}
}
