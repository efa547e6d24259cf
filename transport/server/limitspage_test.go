package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// GET /v1/limits with prefix, after or limit answers one page and, when
// more limits with the prefix follow, next_after: following it walks every
// such limit once, in order. Without them every limit is answered, as
// before.
func TestListLimitsPages(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	var acct []string
	for i := range 7 {
		name := fmt.Sprintf("acct:%d", i)
		acct = append(acct, name)
		e.mustPut(t, name, `{"algorithm":"strict","rate":1}`)
		e.mustPut(t, fmt.Sprintf("z%d", i), `{"algorithm":"strict","rate":1}`)
	}
	list := func(query string) api.Limits {
		t.Helper()
		w := e.do(t, "GET", "/v1/limits"+query, "")
		if w.Code != http.StatusOK {
			t.Fatalf("GET /v1/limits%s: %d %s", query, w.Code, w.Body)
		}
		var out api.Limits
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if all := list(""); len(all.Limits) != 14 || all.NextAfter != "" {
		t.Fatalf("unpaged: %d limits, next_after %q; want all 14 and none", len(all.Limits), all.NextAfter)
	}
	for _, size := range []int{1, 3, 7, 100} {
		var got []string
		after := ""
		for pages := 0; pages < 10; pages++ {
			p := list(fmt.Sprintf("?prefix=acct:&limit=%d&after=%s", size, url.QueryEscape(after)))
			for _, l := range p.Limits {
				got = append(got, l.Name)
			}
			if p.NextAfter == "" {
				break
			}
			after = p.NextAfter
		}
		if !slices.Equal(got, acct) {
			t.Errorf("limit %d: pages gave %v, want %v", size, got, acct)
		}
	}
	if p := list("?prefix=acct:"); len(p.Limits) != 7 || p.NextAfter != "" {
		t.Errorf("prefix alone: %d limits, next_after %q; want 7 (default page %d) and none", len(p.Limits), p.NextAfter, api.DefaultLimitsPage)
	}
	if p := list("?after=z5"); len(p.Limits) != 1 || p.Limits[0].Name != "z6" {
		t.Errorf("after=z5: %+v, want z6", p.Limits)
	}
	if p := list("?prefix=none"); p.Limits == nil || len(p.Limits) != 0 {
		t.Errorf("no match: %+v, want an empty array", p.Limits)
	}
}

// Bad page queries are refused with 400 naming what is allowed, over the
// edges of the accepted range.
func TestListLimitsBadQueries(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	for _, q := range []string{"?limit=1", "?limit=10000", "?prefix=" + strings.Repeat("a", 128)} {
		if w := e.do(t, "GET", "/v1/limits"+q, ""); w.Code != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", q, w.Code, w.Body)
		}
	}
	for _, tc := range []struct{ query, mention string }{
		{"?limit=0", "limit=\"0\"; allowed: an integer 1-10000"},
		{"?limit=10001", "limit=\"10001\""},
		{"?limit=x", "limit=\"x\""},
		{"?limit=1&limit=2", "given 2 times"},
		{"?prefix=a%20b", "prefix \"a b\": allowed: empty, or 1-128 characters"},
		{"?after=" + strings.Repeat("a", 129), "after"},
		{"?page=2", "query parameter \"page\"; allowed: prefix=P"},
	} {
		w := e.do(t, "GET", "/v1/limits"+tc.query, "")
		m := decode(t, w)
		if msg, _ := m["error"].(string); w.Code != http.StatusBadRequest || !strings.Contains(msg, tc.mention) {
			t.Errorf("%s: %d %q, want 400 mentioning %q", tc.query, w.Code, msg, tc.mention)
		}
	}
}

// A name escaped in the path (%3A for ':', as Python's quote(name,
// safe="") sends it) is the same limit as the name written plainly, on
// every route that names a limit; an escaped '/' or '%' is still refused.
func TestEscapedNamesAreTheLimit(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "acct%3A42", `{"algorithm":"strict","rate":1000}`)
	if w := e.do(t, "GET", "/v1/limits/acct:42", ""); w.Code != http.StatusOK {
		t.Fatalf("GET the plain name of a limit put escaped: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "POST", "/v1/limits/acct%3a42/reserve", `{"permits":1,"max_wait":"1s"}`); w.Code != http.StatusOK {
		t.Errorf("reserve through the escaped name: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "DELETE", "/v1/limits/acct%3A42", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"name":"acct:42","existed":true`) {
		t.Errorf("delete through the escaped name: %d %s", w.Code, w.Body)
	}
	for _, p := range []string{"/v1/limits/a%2Fb", "/v1/limits/a%25b"} {
		if w := e.do(t, "PUT", p, `{"algorithm":"strict","rate":1}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not allowed") {
			t.Errorf("PUT %s: %d %s, want 400 naming the byte", p, w.Code, w.Body)
		}
	}
}

// The unpaged list answers every limit up to MaxUnpagedLimits of them,
// and past that a 400 naming the paged list (as /v1/readable-limits does
// from a store that cannot read its replica's limits).
func TestUnpagedListBounded(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	cfg := strictConfig(t, time.Second, 0)
	ctx := context.Background()
	for i := range MaxUnpagedLimits {
		if _, err := e.store.PutLimit(ctx, fsm.PutLimit{Name: fmt.Sprintf("k:%05d", i), Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/v1/limits", "/v1/readable-limits"} {
		w := e.do(t, "GET", path, "")
		var out api.Limits
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &out) != nil || len(out.Limits) != MaxUnpagedLimits {
			t.Fatalf("GET %s of %d limits: %d, %d limits; want 200 and all", path, MaxUnpagedLimits, w.Code, len(out.Limits))
		}
	}
	if _, err := e.store.PutLimit(ctx, fsm.PutLimit{Name: "one-more", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/limits", "/v1/readable-limits"} {
		w := e.do(t, "GET", path, "")
		body := w.Body.String()
		for _, mention := range []string{"more than 10000 limits", "?limit=N", "?after=NEXT_AFTER", "next_after"} {
			if w.Code != http.StatusBadRequest || !strings.Contains(body, mention) {
				t.Errorf("GET %s of %d limits: %d %.200s; want 400 mentioning %q", path, MaxUnpagedLimits+1, w.Code, body, mention)
			}
		}
	}
	if w := e.do(t, "GET", "/v1/limits?limit=10000&after=k:09999", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"one-more"`) {
		t.Errorf("the paged list past the bound: %d %.200s", w.Code, w.Body)
	}
}
