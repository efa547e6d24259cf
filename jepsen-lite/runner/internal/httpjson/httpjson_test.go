package httpjson

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClientSchemeAndToken: Do speaks plain HTTP without a token; a Client
// with HTTPS and a token reaches a TLS server with "Authorization: Bearer";
// a non-2xx answer carries its code.
func TestClientSchemeAndToken(t *testing.T) {
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.Error(w, "no such thing", http.StatusNotFound)
			return
		}
		w.Write([]byte(`{"auth":"` + r.Header.Get("Authorization") + `","tls":` + map[bool]string{true: "true", false: "false"}[r.TLS != nil] + `}`))
	}
	type answer struct {
		Auth string `json:"auth"`
		TLS  bool   `json:"tls"`
	}
	ctx := context.Background()

	plain := httptest.NewServer(http.HandlerFunc(handler))
	defer plain.Close()
	var got answer
	require.NoError(t, Do(ctx, plain.Client(), "plain", plain.Listener.Addr().String(), http.MethodGet, "/x", nil, &got, time.Second))
	require.Equal(t, answer{}, got, "plain: want no token and no TLS")

	secure := httptest.NewTLSServer(http.HandlerFunc(handler))
	defer secure.Close()
	c := Client{HC: secure.Client(), HTTPS: true, Token: "pmt_test"}
	got = answer{}
	require.NoError(t, c.Do(ctx, "secure", secure.Listener.Addr().String(), http.MethodPost, "/x", map[string]int{"a": 1}, &got, time.Second))
	require.Equal(t, answer{Auth: "Bearer pmt_test", TLS: true}, got, "secure: want the bearer token over TLS")
	err := c.Do(ctx, "secure", secure.Listener.Addr().String(), http.MethodGet, "/missing", nil, nil, time.Second)
	require.Equal(t, http.StatusNotFound, Code(err), "missing: %v, want 404 naming the process", err)
	require.ErrorContains(t, err, "on secure", "missing: want 404 naming the process")
	// The plain client cannot talk to the TLS server.
	err = Do(ctx, plain.Client(), "plain", secure.Listener.Addr().String(), http.MethodGet, "/x", nil, nil, time.Second)
	require.Equal(t, http.StatusBadRequest, Code(err), "plain HTTP to a TLS server: %v, want 400", err)
}
