package server

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// serve sends one request to h with the bearer secret (none if "") and
// returns the answer.
func serve(h http.Handler, method, path, body, secret string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if secret != "" {
		r.Header.Set("Authorization", "Bearer "+secret)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestStatusPageFiles: /ui and its files are served, without a token on
// an agent that requires tokens, with their types and a
// Content-Security-Policy that allows only this origin; an unknown file
// is 404; and no file refers to another origin (no CDN, nothing fetched
// from elsewhere) or calls a path the page may not use without a token's
// role.
func TestStatusPageFiles(t *testing.T) {
	store, _ := tokenSet(t)
	h := RequireTokens(NewHandler(fakestore.New(), HandlerOptions{}), store)
	for path, ct := range map[string]string{"/ui": "text/html", "/ui/index.html": "text/html", "/ui/app.js": "text/javascript", "/ui/style.css": "text/css"} {
		w := serve(h, "GET", path, "", "")
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ct) || w.Body.Len() == 0 {
			t.Errorf("GET %s: %d %q, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	if w := serve(h, "GET", "/ui/nope.js", "", ""); w.Code != 404 || !strings.Contains(w.Body.String(), "open /ui") {
		t.Errorf("GET /ui/nope.js: %d %s", w.Code, w.Body.String())
	}
	if w := serve(h, "POST", "/ui", "", ""); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui: %d %v", w.Code, w.Header())
	}
	other := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9]|@import|<script[^>]*>[^<]`)
	apiPath := regexp.MustCompile(`"(/v1/[a-z./-]*)`)
	err := fs.WalkDir(uiFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFiles.ReadFile(p)
		if err != nil {
			return err
		}
		// Comments aside (a URL in a comment fetches nothing).
		text := regexp.MustCompile(`(?m)^\s*//.*$|/\*[\s\S]*?\*/`).ReplaceAllString(string(b), "")
		text = strings.ReplaceAll(text, `location.protocol + "//"`, "") // links to the other members' pages
		if m := other.FindString(text); m != "" {
			t.Errorf("%s refers to another origin or inlines a script: %q", p, m)
		}
		for _, m := range apiPath.FindAllStringSubmatch(text, -1) {
			path := m[1]
			if strings.HasSuffix(path, "/") {
				path += "api" // "/v1/limits/" + name + ...
			}
			if n, _ := access("GET", path); n == auth.NeedAdmin {
				t.Errorf("%s calls %s, which needs admin", p, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadableLimits: GET /v1/readable-limits answers the limits the
// token may read: a client token restricted to api* only those, other
// tokens (and a handler without tokens) every limit, as GET /v1/limits.
func TestReadableLimits(t *testing.T) {
	store, secrets := tokenSet(t)
	fs := fakestore.New()
	h := RequireTokens(NewHandler(fs, HandlerOptions{}), store)
	for _, name := range []string{"zeta", "api2", "api1", "other"} {
		if w := serve(h, "PUT", "/v1/limits/"+name, `{"algorithm":"bursty","rate":5}`, secrets["root"]); w.Code != 201 {
			t.Fatalf("put %s: %d %s", name, w.Code, w.Body.String())
		}
	}
	names := func(w *httptest.ResponseRecorder) []string {
		t.Helper()
		var ls api.Limits
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &ls) != nil {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		var out []string
		for _, l := range ls.Limits {
			out = append(out, l.Name)
		}
		return out
	}
	all := []string{"api1", "api2", "other", "zeta"}
	for tok, want := range map[string][]string{"narrow": {"api1", "api2"}, "app": all, "w1": all, "root": all} {
		if got := names(serve(h, "GET", "/v1/readable-limits", "", secrets[tok])); !slices.Equal(got, want) {
			t.Errorf("token %s reads %v, want %v", tok, got, want)
		}
	}
	plain := NewHandler(fs, HandlerOptions{})
	if got := names(serve(plain, "GET", "/v1/readable-limits", "", "")); !slices.Equal(got, all) {
		t.Errorf("without tokens: %v, want %v", got, all)
	}
}

// TestLimitViewHoldsAndReservations: a limit's view counts the permits its
// in-flight holds keep and its reservations not settled yet.
func TestLimitViewHoldsAndReservations(t *testing.T) {
	h := NewHandler(fakestore.New(), HandlerOptions{})
	for name, spec := range map[string]string{"cap": `{"algorithm":"concurrency","max_in_flight":5}`, "rpm": `{"algorithm":"bursty","rate":100}`} {
		if w := serve(h, "PUT", "/v1/limits/"+name, spec, ""); w.Code != 201 {
			t.Fatalf("put %s: %d %s", name, w.Code, w.Body.String())
		}
	}
	view := func(name string) (inFlight int64, open int) {
		t.Helper()
		var l api.Limit
		w := serve(h, "GET", "/v1/limits/"+name, "", "")
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &l) != nil {
			t.Fatalf("get %s: %d %s", name, w.Code, w.Body.String())
		}
		return l.InFlightPermits, l.OpenReservations
	}
	reserve := func(body string) string {
		t.Helper()
		var g struct {
			ID string `json:"reservation_id"`
		}
		w := serve(h, "POST", "/v1/reserve", body, "")
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &g) != nil {
			t.Fatalf("reserve %s: %d %s", body, w.Code, w.Body.String())
		}
		return g.ID
	}
	a := reserve(`{"limits":[{"name":"cap","permits":2},{"name":"rpm","permits":3}]}`)
	b := reserve(`{"limits":[{"name":"cap","permits":1}]}`)
	if f, o := view("cap"); f != 3 || o != 2 {
		t.Errorf("cap after two reservations: in flight %d, open %d; want 3, 2", f, o)
	}
	if f, o := view("rpm"); f != 0 || o != 1 {
		t.Errorf("rpm: in flight %d, open %d; want 0, 1", f, o)
	}
	if w := serve(h, "POST", "/v1/reservations/"+a+"/settle", `{"actual":[]}`, ""); w.Code != 200 {
		t.Fatalf("settle: %d %s", w.Code, w.Body.String())
	}
	if w := serve(h, "POST", "/v1/reservations/"+b+"/release", `{}`, ""); w.Code != 200 {
		t.Fatalf("release: %d %s", w.Code, w.Body.String())
	}
	// Settled: a is no longer open, its holds stay until released;
	// released: b's hold is gone, b may still be settled.
	if f, o := view("cap"); f != 2 || o != 1 {
		t.Errorf("cap after settling one and releasing the other: in flight %d, open %d; want 2, 1", f, o)
	}
	if f, o := view("rpm"); f != 0 || o != 0 {
		t.Errorf("rpm after the settlement: in flight %d, open %d; want 0, 0", f, o)
	}
}
