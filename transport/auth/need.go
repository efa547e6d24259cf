package auth

import (
	"fmt"
	"strings"
)

// Need is what a request needs of its token.
type Need uint8

// The needs, from none to admin.
const (
	// NeedNothing: health checks, served without a token.
	NeedNothing Need = iota
	// NeedAnyToken: any valid token (status, metrics, the readable
	// limits). The middleware passes the token on (TokenFrom).
	NeedAnyToken
	// NeedRead: client, worker or admin; a restricted client token only
	// for its limits.
	NeedRead
	// NeedClient: client or admin; a restricted client token only for
	// its limits. The middleware passes the token on (TokenFrom): a
	// reserve of a session is the token's, answered only on a session
	// the token opened.
	NeedClient
	// NeedClientAnyLimit: client or admin, whatever the token's limits
	// (sessions: they belong to no limit, but to the token; the
	// middleware passes the token on, TokenFrom).
	NeedClientAnyLimit
	// NeedClientEachLimit: client or admin, for limits named in the
	// request's body: the middleware passes the token on (TokenFrom) and
	// the handler checks each limit with MayUseAll.
	NeedClientEachLimit
	// NeedWorker: worker or admin.
	NeedWorker
	// NeedAdmin: admin only.
	NeedAdmin
)

// String names the roles that satisfy n, for error messages.
func (n Need) String() string {
	switch n {
	case NeedAnyToken:
		return "any role"
	case NeedRead:
		return "client, worker or admin"
	case NeedClient, NeedClientAnyLimit, NeedClientEachLimit:
		return "client (or admin)"
	case NeedWorker:
		return "worker (or admin)"
	case NeedAdmin:
		return "admin"
	}
	return "none"
}

// RequiredRole is the role an error body names for n.
func (n Need) RequiredRole() string {
	switch n {
	case NeedRead, NeedClient, NeedClientAnyLimit, NeedClientEachLimit:
		return string(RoleClient)
	case NeedWorker:
		return string(RoleWorker)
	case NeedAdmin:
		return string(RoleAdmin)
	case NeedAnyToken:
		return "any"
	}
	return ""
}

// Allows reports whether t satisfies n for limit ("" when the request
// names none); when it does not, why may explain a refusal a role alone
// does not (a client token's limits), else it is "".
func Allows(t Token, n Need, limit string) (ok bool, why string) {
	switch t.Role {
	case RoleAdmin:
		return true, ""
	case RoleClient:
		if n == NeedAnyToken || n == NeedClientAnyLimit || n == NeedClientEachLimit {
			return true, ""
		}
		if n != NeedRead && n != NeedClient {
			return false, ""
		}
	case RoleWorker:
		return n == NeedAnyToken || n == NeedRead || n == NeedWorker, ""
	default:
		return false, ""
	}
	if len(t.Limits) > 0 {
		if limit == "" {
			return false, fmt.Sprintf("token %q may use only the limits matching %s, not all of them", t.Name, strings.Join(t.Limits, ","))
		}
		if !t.MayUse(limit) {
			return false, fmt.Sprintf("token %q may use only the limits matching %s, not %q", t.Name, strings.Join(t.Limits, ","), limit)
		}
	}
	return true, ""
}

// MayUseAll reports whether t may use every limit in names (an admin
// token, or a client token whose limits cover them); when not, why names
// the first limit it may not use.
func MayUseAll(t Token, names []string) (ok bool, why string) {
	if t.Role == RoleAdmin || len(t.Limits) == 0 {
		return t.Role == RoleAdmin || t.Role == RoleClient, fmt.Sprintf("token %q has role %s; client (or admin) is needed", t.Name, t.Role)
	}
	for _, name := range names {
		if !t.MayUse(name) {
			return false, fmt.Sprintf("token %q may use only the limits matching %s, not %q", t.Name, strings.Join(t.Limits, ","), name)
		}
	}
	return true, ""
}
