package history

// Operations and values of the multi workload (multi-limit reserves,
// settlements and releases; see the README's "The multi workload").

// Function names of the multi workload. A multi-limit reserve is recorded
// as FReserve with a MultiReserveRequest value (its ReserveRequest part
// names the strict limit and its one permit, so the conservation and
// durability checkers judge that dimension as any strict reserve).
const (
	// FSettle settles a reservation (client.Settle, or a raw POST
	// /v1/reservations/{id}/settle carrying the worker's own request ID).
	FSettle = "settle"
	// FRelease releases a reservation's in-flight permits.
	FRelease = "release"
)

// LimitPermits is one limit of a multi-limit reserve or settlement.
type LimitPermits struct {
	Limit   string `json:"limit"`
	Permits int64  `json:"permits"`
}

// MultiReserveRequest is the invoke value of a multi-limit reserve.
type MultiReserveRequest struct {
	ReserveRequest
	// Limits are every limit asked for (the strict one included).
	Limits []LimitPermits `json:"limits"`
	// SettleWithinNanos is the reserve's settle_within (0: the server's
	// default).
	SettleWithinNanos int64 `json:"settle_within_ns,omitempty"`
}

// MultiReserveResponse is the completion value of a multi-limit reserve.
type MultiReserveResponse struct {
	ReserveResponse
	// ReservationID names a granted reservation (ok only).
	ReservationID string `json:"reservation_id,omitempty"`
	// Blocking is the limit that refused (fail with retry_after).
	Blocking string `json:"blocking,omitempty"`
}

// MultiAPICallValue is the value of an api-call of the multi workload.
type MultiAPICallValue struct {
	APICallValue
	// ReservationID is the reservation whose permits the call uses.
	ReservationID string `json:"reservation_id,omitempty"`
	// Tokens is the call's actual token cost; EstimateTokens what the
	// reserve asked of the token limit; DurationNanos how long it lasts.
	Tokens         int64 `json:"tokens,omitempty"`
	EstimateTokens int64 `json:"estimate_tokens,omitempty"`
	DurationNanos  int64 `json:"duration_ns,omitempty"`
}

// Settle modes (SettleValue.Mode).
const (
	// SettleClient: client.Settle (a request ID of the client's own, kept
	// across its failover retries).
	SettleClient = "client"
	// SettleRaw: a raw POST with the worker's request ID (SettleValue.
	// SettleRequestID); the worker sends it twice, the second must be
	// answered as a duplicate of the first.
	SettleRaw = "raw"
	// SettleAgain: client.Settle of a reservation already settled (a new
	// request ID): must be refused 409 (conflict).
	SettleAgain = "again"
)

// SettleValue is the value of a settle op: invoke (the request) and
// completion (the answer). ok: the server's answer; fail: a definite
// refusal (Code: its HTTP status) or an undelivered request; info: unknown.
type SettleValue struct {
	ReservationID string         `json:"reservation_id"`
	Mode          string         `json:"mode"`
	Attempt       int            `json:"attempt,omitempty"`
	Actual        []LimitPermits `json:"actual,omitempty"`
	// SettleRequestID is a raw settle's request ID.
	SettleRequestID string `json:"settle_request_id,omitempty"`

	Duplicate bool           `json:"duplicate,omitempty"`
	Limits    []SettledLimit `json:"limits,omitempty"`
	Code      int            `json:"code,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// SettledLimit is one limit of a settle answer.
type SettledLimit struct {
	Limit    string `json:"limit"`
	Reserved int64  `json:"reserved"`
	Actual   int64  `json:"actual"`
	Refunded int64  `json:"refunded"`
	Charged  int64  `json:"charged"`
}

// ReleaseValue is the value of a release op (invoke and completion).
type ReleaseValue struct {
	ReservationID string `json:"reservation_id"`
	// Attempt is 1 for the first release of the reservation, 2 for the
	// repeated one.
	Attempt  int   `json:"attempt"`
	Released int64 `json:"released,omitempty"`
	// Duplicate: the register had released the reservation before (an
	// earlier attempt whose answer was lost, or the first release).
	Duplicate bool   `json:"duplicate,omitempty"`
	Code      int    `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
}
