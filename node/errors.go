package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors returned by a Node. Callers map them to protocol errors (the HTTP
// layer: ErrNoLeader, ErrRemoved → 503, ErrNotFound → 404, ErrInvalid →
// 400) and show Message(err) to their users.
var (
	// ErrNoLeader: no leader is known or reachable, or leadership was lost
	// before the request was committed. The outcome of a write that fails
	// with ErrNoLeader may be unknown; retry with the same request ID.
	ErrNoLeader = errors.New("node: no leader reachable")
	// ErrNotFound: the named limit (or server) does not exist.
	ErrNotFound = errors.New("node: not found")
	// ErrInvalid: the request is invalid for the current state (e.g. more
	// permits than the limit can ever grant). It was not replicated.
	ErrInvalid = errors.New("node: invalid request")
	// ErrConflict: the request conflicts with the register's state (a
	// leased limit whose leases hold permits, deleted without force); the
	// register decided so and changed nothing.
	ErrConflict = errors.New("node: conflict")
	// ErrForbidden: the client's token does not allow the call (the
	// server's authorizer refused it). Nothing was done.
	ErrForbidden = errors.New("node: forbidden")
	// ErrUnauthenticated: the client connection's token is no longer
	// valid (revoked by a reload). Nothing was done.
	ErrUnauthenticated = errors.New("node: unauthenticated")
	// ErrOverloaded: the node holds as many reserves as it may
	// (Config.MaxPendingReserves); this one was refused at once and
	// changed nothing. Retry shortly, or at another node.
	ErrOverloaded = errors.New("node: overloaded")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("node: shut down")
	// ErrRemoved: this node was removed from the cluster; it serves
	// nothing (restart it with a new data directory to join again).
	ErrRemoved = errors.New("node: removed from the cluster")
)

// userError is an error whose message is written for the users of the API:
// Error() adds the sentinel kind in front (for logs and errors.Is), and
// Message returns the message alone.
type userError struct {
	kind error
	msg  string
}

func (e *userError) Error() string { return e.kind.Error() + ": " + e.msg }
func (e *userError) Unwrap() error { return e.kind }

// userErrorf returns an error of kind whose user message is formatted.
func userErrorf(kind error, format string, args ...any) error {
	return &userError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// sentinelPrefixes are the texts of permitd's sentinel errors that start
// the messages of wrapped errors ("fsm: invalid command: limit name ...").
var sentinelPrefixes = []string{
	"node: no leader reachable: ", "node: not found: ", "node: invalid request: ", "node: removed from the cluster: ", "node: conflict: ", "node: forbidden: ", "node: unauthenticated: ", "node: overloaded: ",
	"fsm: invalid command: ", "fsm: cannot decode: ", "bucket: ", "node: ",
}

// Message returns err's text for a user of the API: the message of the
// outermost error written for users if err carries one, otherwise err's
// text without the package prefixes of permitd's sentinel errors, which
// say nothing to a user and repeat when errors are wrapped.
func Message(err error) string {
	if err == nil {
		return ""
	}
	var ue *userError
	if errors.As(err, &ue) {
		return ue.msg
	}
	msg := err.Error()
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range sentinelPrefixes {
			if strings.HasPrefix(msg, p) {
				msg, trimmed = msg[len(p):], true
				break // longer prefixes first, from the start again
			}
		}
	}
	return msg
}

// limitNotFound is the error for a limit that does not exist, with a
// suggestion when a known limit's name is one edit away.
func (n *Node) limitNotFound(name string) error {
	return userErrorf(ErrNotFound, "limit %q not found%s", name, didYouMean(name, n.namesNear(name)))
}

// scanNamesUpTo is the most limits namesNear compares a name with one by
// one; beyond it, it looks up the name's one-edit variants instead (about
// 17 000 for a 128-byte name, a millisecond), so that a reserve naming an
// unknown limit costs the same among a million limits as among ten.
const scanNamesUpTo = 4096

// namesNear returns the limits one edit away from name (oneEditApart).
func (n *Node) namesNear(name string) []string {
	if n.fsm.LimitCount() <= scanNamesUpTo {
		var near []string
		n.fsm.EachLimitName(func(k string) bool {
			if oneEditApart(name, k) {
				near = append(near, k)
			}
			return true
		})
		return near
	}
	near := n.fsm.LimitsNamed(func(yield func([]byte) bool) { oneEditVariants(name, yield) })
	slices.Sort(near)
	return slices.Compact(near) // a variant may be yielded twice
}

// nameAlphabet is the bytes of limit names (fsm.ValidateName).
const nameAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"

// oneEditVariants yields every name one insertion, deletion, substitution
// (of a name byte) or transposition of neighbours away from name, in one
// reused buffer, until yield returns false. A variant may repeat, or be
// longer than a name may be (then it is no limit's name).
func oneEditVariants(name string, yield func([]byte) bool) {
	buf := make([]byte, 0, len(name)+1)
	for i := 0; i <= len(name); i++ {
		for j := 0; j < len(nameAlphabet); j++ {
			buf = append(append(append(buf[:0], name[:i]...), nameAlphabet[j]), name[i:]...) // insertion
			if !yield(buf) {
				return
			}
		}
		if i == len(name) {
			break
		}
		if !yield(append(append(buf[:0], name[:i]...), name[i+1:]...)) { // deletion
			return
		}
		for j := 0; j < len(nameAlphabet); j++ {
			if nameAlphabet[j] == name[i] {
				continue
			}
			buf = append(append(append(buf[:0], name[:i]...), nameAlphabet[j]), name[i+1:]...) // substitution
			if !yield(buf) {
				return
			}
		}
		if i+1 < len(name) && name[i] != name[i+1] {
			buf = append(append(append(buf[:0], name[:i]...), name[i+1], name[i]), name[i+2:]...) // transposition
			if !yield(buf) {
				return
			}
		}
	}
}

// didYouMean returns `; did you mean "x"?` for the names of known that are
// one edit (an insertion, a deletion, a substitution or a transposition of
// neighbours) away from name, or "".
func didYouMean(name string, known []string) string {
	var close []string
	for _, k := range known {
		if oneEditApart(name, k) {
			close = append(close, fmt.Sprintf("%q", k))
		}
	}
	if len(close) == 0 {
		return ""
	}
	slices.Sort(close)
	if len(close) > 3 {
		close = close[:3]
	}
	return "; did you mean " + strings.Join(close, " or ") + "?"
}

// oneEditApart reports whether a and b differ by exactly one insertion,
// deletion, substitution or transposition of two neighbouring bytes.
func oneEditApart(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		if a[i+1:] == b[i+1:] {
			return true // substitution
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:] // transposition
	}
	return a[i:] == b[i+1:] // insertion into a
}
