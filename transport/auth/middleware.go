package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Require wraps next so that every request carries "Authorization: Bearer
// TOKEN" with a token of store that satisfies what access says the request
// needs (NeedNothing: served without a token): 401 with WWW-Authenticate
// without a valid token, 403 for a token without the role or the limit.
// The JSON body, {"error": ..., "required_role": ...}, never repeats the
// secret. access must decide from the method and escaped path alone.
func Require(next http.Handler, store *TokenStore, access func(method, escapedPath string) (Need, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, limit := access(r.Method, r.URL.EscapedPath())
		if n == NeedNothing {
			next.ServeHTTP(w, r)
			return
		}
		what := r.Method + " " + r.URL.EscapedPath()
		h := r.Header.Values("Authorization")
		if len(h) == 0 {
			writeError(w, http.StatusUnauthorized, `Bearer realm="permitd"`,
				fmt.Sprintf("missing token: send \"Authorization: Bearer TOKEN\"; %s needs role %s", what, n), n)
			return
		}
		if len(h) > 1 {
			writeError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_request"`, "more than one Authorization header; send one", n)
			return
		}
		secret, err := ParseAuthorization(h[0])
		if err != nil {
			// err carries ErrInvalid's "auth: " already; writeError adds it.
			writeError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_request"`, strings.TrimPrefix(err.Error(), "auth: "), n)
			return
		}
		t, ok := store.Lookup(secret)
		if !ok {
			writeError(w, http.StatusUnauthorized, `Bearer realm="permitd", error="invalid_token"`,
				fmt.Sprintf("unknown or revoked token; %s needs a token with role %s", what, n), n)
			return
		}
		if ok, why := Allows(t, n, limit); !ok {
			if why == "" {
				why = fmt.Sprintf("token %q has role %s; %s needs role %s", t.Name, t.Role, what, n)
			}
			writeError(w, http.StatusForbidden, "", why, n)
			return
		}
		if n == NeedClient || n == NeedClientEachLimit || n == NeedClientAnyLimit || n == NeedAnyToken {
			r = r.WithContext(context.WithValue(r.Context(), tokenKey{}, t))
		}
		next.ServeHTTP(w, r)
	})
}

// writeError answers {"error": "auth: " + msg, "required_role": role}.
func writeError(w http.ResponseWriter, code int, challenge, msg string, n Need) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	body, _ := json.Marshal(struct {
		Error        string `json:"error"`
		RequiredRole string `json:"required_role"`
	}{"auth: " + msg, n.RequiredRole()})
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// tokenKey is the context key of the token Require passes on.
type tokenKey struct{}

// TokenFrom returns the token Require authenticated a request with, for
// a client's requests: those on one limit (NeedClient: a reserve, whose
// session, if it names one, must be the token's), those whose limits are
// in the body (NeedClientEachLimit) and those that act for the token
// whatever its limits (NeedClientAnyLimit: a session, which the token
// owns), and those any token may make (NeedAnyToken: a list of the limits
// the token may read is filtered by it); false when tokens are off or the
// request is of another kind.
func TokenFrom(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}
