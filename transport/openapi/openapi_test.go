package openapi_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/openapi"
	"github.com/permitd/permitd/transport/server"
)

// loadDoc parses the embedded document.
func loadDoc(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.JSON())
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	return doc
}

// roles maps each x-permitd-role to the required_role a 401 or 403 body
// names for it ("" for none: no token needed).
var roles = map[string]string{
	"none": "", "any": "any", "read": "client", "read-all": "client",
	"client": "client", "client-any-limit": "client", "worker": "worker", "admin": "admin",
}

// operations lists the document's operations as "METHOD /path", sorted.
func operations(doc *openapi3.T) []string {
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// roleOf returns an operation's x-permitd-role.
func roleOf(op *openapi3.Operation) string {
	r, _ := op.Extensions["x-permitd-role"].(string)
	return r
}

// TestDocumentIsValid: the document is a valid OpenAPI 3.0 document, and
// its conventions hold on every operation: a unique operationId, a known
// x-permitd-role, no security exactly on the public operations, 401
// exactly where a token is needed and 403 where a role can be refused,
// Retry-After on every 429 and 503, and HEAD exactly beside the GETs the
// server also answers to HEAD.
func TestDocumentIsValid(t *testing.T) {
	doc := loadDoc(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi %q, want 3.0.x", doc.OpenAPI)
	}
	ids := map[string]string{}
	for _, key := range operations(doc) {
		method, path, _ := strings.Cut(key, " ")
		op := doc.Paths.Value(path).GetOperation(method)
		if prev, dup := ids[op.OperationID]; dup || op.OperationID == "" {
			t.Errorf("%s: operationId %q empty or also on %s", key, op.OperationID, prev)
		}
		ids[op.OperationID] = key
		role := roleOf(op)
		if _, ok := roles[role]; !ok {
			t.Errorf("%s: x-permitd-role %q, want one of none, any, read, read-all, client, client-any-limit, worker, admin", key, role)
			continue
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != (role == "none") {
			t.Errorf("%s: role %q but security %v", key, role, op.Security)
		}
		if (op.Responses.Status(401) != nil) != (role != "none") {
			t.Errorf("%s: role %q: 401 documented: %v", key, role, op.Responses.Status(401) != nil)
		}
		if (op.Responses.Status(403) != nil) != (role != "none" && role != "any") {
			t.Errorf("%s: role %q: 403 documented: %v", key, role, op.Responses.Status(403) != nil)
		}
		for code, r := range op.Responses.Map() {
			if code == "429" || code == "503" {
				if h := r.Value.Headers["Retry-After"]; h == nil || !h.Value.Required {
					t.Errorf("%s: %s without a required Retry-After header", key, code)
				}
			}
			if code == "401" {
				if h := r.Value.Headers["WWW-Authenticate"]; h == nil || !h.Value.Required {
					t.Errorf("%s: 401 without a required WWW-Authenticate header", key)
				}
			}
		}
	}
	// The methods each path serves, as the handler's Allow headers list
	// them (TestConformance checks them against the server).
	for path, item := range doc.Paths.Map() {
		if (item.Get != nil && path != "/v1/snapshot") != (item.Head != nil) {
			t.Errorf("%s: GET %v, HEAD %v: the handler answers HEAD beside every GET but the snapshot's", path, item.Get != nil, item.Head != nil)
		}
	}
}

// routeLabels returns the route labels of transport/server/handler.go (the
// values of its routeLabels array but "unknown"), read from the source:
// the label is the path pattern each route serves.
func routeLabels(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../server/handler.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "routeLabels" || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatalf("routeLabels is not a composite literal")
		}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				t.Fatalf("routeLabels element %T, want key: value", e)
			}
			bl, ok := kv.Value.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				t.Fatalf("routeLabels value %T, want a string literal", kv.Value)
			}
			s, err := strconv.Unquote(bl.Value)
			if err != nil {
				t.Fatal(err)
			}
			if s != "unknown" {
				labels = append(labels, s)
			}
		}
		return false
	})
	if len(labels) < 10 {
		t.Fatalf("found %d route labels in ../server/handler.go: the parse is broken", len(labels))
	}
	slices.Sort(labels)
	return labels
}

// TestEveryRouteIsDocumented: the document's paths are exactly the
// handler's routes, so that neither can gain a path the other lacks.
func TestEveryRouteIsDocumented(t *testing.T) {
	doc := loadDoc(t)
	labels := routeLabels(t)
	for _, l := range labels {
		if doc.Paths.Value(l) == nil {
			t.Errorf("route %s (transport/server/handler.go) has no path in openapi.json", l)
		}
	}
	for path := range doc.Paths.Map() {
		if !slices.Contains(labels, path) {
			t.Errorf("path %s of openapi.json is no route of transport/server/handler.go", path)
		}
	}
}

// TestServedDocumentIsTheEmbeddedOne: GET /v1/openapi.json answers exactly
// the embedded bytes as application/json, without a token on a server
// that requires tokens, and HEAD its length.
func TestServedDocumentIsTheEmbeddedOne(t *testing.T) {
	ts, err := auth.ParseTokenFile(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	// The route never reaches the store.
	h := server.RequireTokens(server.NewHandler(nil, server.HandlerOptions{}), auth.NewTokenStore(ts))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, "/v1/openapi.json", nil))
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" ||
			w.Header().Get("Content-Length") != strconv.Itoa(len(openapi.JSON())) {
			t.Fatalf("%s: %d %v", method, w.Code, w.Header())
		}
		if method == http.MethodGet && !bytes.Equal(w.Body.Bytes(), openapi.JSON()) {
			t.Fatalf("GET /v1/openapi.json: %d bytes that are not the embedded document (%d bytes)", w.Body.Len(), len(openapi.JSON()))
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/openapi.json", nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %v", w.Code, w.Header())
	}
}
