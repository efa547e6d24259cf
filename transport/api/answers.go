package api

// answers.go: the answers of the reserve, reservation, session and
// cluster endpoints, and of every error. The register writes the hot ones
// by hand for speed (transport/server's reserve.go and reservation.go:
// the same keys, TestReserveAnswersDecodeAsTheAPIs checks that every key
// it writes is a field here); clients read them into these types.

// ErrorAnswer is the body of every error answer: what was wrong and what
// is allowed. 401 and 403 add the role the request needs.
type ErrorAnswer struct {
	Error        string `json:"error"`
	RequiredRole string `json:"required_role,omitempty"`
}

// ReserveAnswer is the answer to a reserve: POST /v1/limits/{name}/reserve
// (200 granted, 429 refused, 503 busy, 410 an expired session) and POST
// /v1/reserve, which adds the reservation's fields.
type ReserveAnswer struct {
	Granted bool `json:"granted"`
	// WaitNanos (granted) counts from when the client received the
	// answer; ExpiresInNanos from when it sent the request.
	WaitNanos      int64 `json:"wait_ns"`
	ExpiresInNanos int64 `json:"expires_in_ns"`
	SpacingNanos   int64 `json:"spacing_ns"`
	// RetryAfterNanos (refused, busy) counts from the answer.
	RetryAfterNanos int64 `json:"retry_after_ns"`
	// Duplicate: a retry of a request already decided, answered with that
	// decision.
	Duplicate bool `json:"duplicate"`
	// SessionExpired (410): the session is not open (expired, never
	// opened, or another token's); open a new one.
	SessionExpired bool `json:"session_expired"`
	// KeysFull (429): the limit is a key a template would create, and
	// its template's max keys or the register's cap on templated keys is
	// reached (Error names it); RetryAfterNanos is when a key may go.
	KeysFull bool   `json:"keys_full"`
	Error    string `json:"error"`
	// ReservationID (POST /v1/reserve, granted) names the reservation to
	// settle or release, a decimal string; Blocking (refused) is the limit
	// that could serve its part last.
	ReservationID string `json:"reservation_id"`
	Blocking      string `json:"blocking"`
	// Holds (granted) reports in-flight permits; HoldExpiresInNanos is
	// when their hold lapses, counted as ExpiresInNanos is plus HeldNanos,
	// how long the node held the request before its durations count.
	Holds              bool  `json:"holds"`
	HoldExpiresInNanos int64 `json:"hold_expires_in_ns"`
	HeldNanos          int64 `json:"held_ns"`
}

// SettledLimit is what a settlement did to one limit of a reservation.
type SettledLimit struct {
	Limit    string `json:"name"`
	Reserved int64  `json:"reserved"`
	Actual   int64  `json:"actual"`
	// Refunded went back to the limit; Charged was added to it as debt.
	Refunded int64 `json:"refunded"`
	Charged  int64 `json:"charged"`
}

// SettleAnswer is the answer to POST /v1/reservations/{id}/settle.
type SettleAnswer struct {
	Settled bool `json:"settled"`
	// Duplicate: the register had settled this request already.
	Duplicate bool           `json:"duplicate"`
	Limits    []SettledLimit `json:"limits"`
}

// ReleaseAnswer is the answer to POST /v1/reservations/{id}/release.
type ReleaseAnswer struct {
	// Released counts the permits freed by this release.
	Released int64 `json:"released"`
	// Duplicate: the reservation had been released before (perhaps by an
	// earlier attempt whose answer was lost), and nothing was freed now.
	Duplicate bool `json:"duplicate"`
}

// JoinAnswer is the answer to POST /v1/cluster/join.
type JoinAnswer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Joined   bool   `json:"joined"`
	// Voter is false for a server that was added (or joined before and
	// is still awaiting promotion), true for one that votes already.
	Voter bool `json:"voter"`
}
