package sidecar

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/permitd/permitd/transport/auth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSidecarTokens: with Options.Tokens, health checks need nothing, a
// reserve a client token that may use the limit, a session any client
// token, status any token; other paths admin.
func TestSidecarTokens(t *testing.T) {
	store, secrets, err := auth.NewTokenStoreOf(auth.Spec{Name: "app", Role: auth.RoleClient}, auth.Spec{Name: "other", Role: auth.RoleClient, Limits: []string{"x*"}},
		auth.Spec{Name: "w", Role: auth.RoleWorker}, auth.Spec{Name: "root", Role: auth.RoleAdmin})
	require.NoError(t, err)
	h := NewHandler(newFakeSidecarWorker(), Options{Tokens: store})
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/healthz", "", 200},
		{"POST", "/v1/limits/api/reserve", "", 401},
		{"POST", "/v1/limits/api/reserve", "w", 403},
		{"POST", "/v1/limits/api/reserve", "other", 403},
		{"POST", "/v1/limits/api/reserve", "app", 429}, // past auth: the fake worker refuses
		{"POST", "/v1/sessions", "other", 201},
		{"GET", "/v1/status", "w", 200},
		{"GET", "/v1/status", "", 401},
		{"POST", "/v1/debug/faults", "app", 403},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{}`))
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+secrets[tc.token])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, tc.want, w.Code, "%s %s with %q: %s", tc.method, tc.path, tc.token, w.Body.String())
	}
}
