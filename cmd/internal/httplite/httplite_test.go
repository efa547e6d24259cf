package httplite

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestDoAgainstNetHTTPServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/refuse" {
			w.WriteHeader(429)
		}
		w.Write([]byte(r.Method + ":" + string(b)))
	}))
	defer srv.Close()
	c := New(strings.TrimPrefix(srv.URL, "http://"), 2*time.Second)
	defer c.Close()
	for i := 0; i < 3; i++ { // reuses the connection
		code, body, err := c.Do("POST", "/x", []byte(`{"permits":1}`))
		if err != nil || code != 200 || string(body) != `POST:{"permits":1}` {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	}
	code, body, err := c.Do("PUT", "/refuse", nil)
	if err != nil || code != 429 || string(body) != "PUT:" {
		t.Fatalf("got %d %q %v", code, body, err)
	}
}

func TestDoReportsDeadServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	c := New(addr, time.Second)
	if _, _, err := c.Do("GET", "/", nil); err == nil {
		t.Fatal("no error from a closed server")
	}
}
