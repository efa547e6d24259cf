package httpjson

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
	if err := Do(ctx, plain.Client(), "plain", plain.Listener.Addr().String(), http.MethodGet, "/x", nil, &got, time.Second); err != nil {
		t.Fatal(err)
	}
	if got != (answer{}) {
		t.Fatalf("plain: %+v, want no token and no TLS", got)
	}

	secure := httptest.NewTLSServer(http.HandlerFunc(handler))
	defer secure.Close()
	c := Client{HC: secure.Client(), HTTPS: true, Token: "pmt_test"}
	got = answer{}
	if err := c.Do(ctx, "secure", secure.Listener.Addr().String(), http.MethodPost, "/x", map[string]int{"a": 1}, &got, time.Second); err != nil {
		t.Fatal(err)
	}
	if got != (answer{Auth: "Bearer pmt_test", TLS: true}) {
		t.Fatalf("secure: %+v, want the bearer token over TLS", got)
	}
	err := c.Do(ctx, "secure", secure.Listener.Addr().String(), http.MethodGet, "/missing", nil, nil, time.Second)
	if Code(err) != http.StatusNotFound || !strings.Contains(err.Error(), "on secure") {
		t.Fatalf("missing: %v (code %d), want 404 naming the process", err, Code(err))
	}
	// The plain client cannot talk to the TLS server.
	if err := Do(ctx, plain.Client(), "plain", secure.Listener.Addr().String(), http.MethodGet, "/x", nil, nil, time.Second); Code(err) != http.StatusBadRequest {
		t.Fatalf("plain HTTP to a TLS server: %v, want 400", err)
	}
}
