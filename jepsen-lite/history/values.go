package history

import "encoding/json"

// ReserveRequest is the value of a reserve (or acquire) invoke.
type ReserveRequest struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Permits is the number of permits asked for (>= 1).
	Permits int64 `json:"permits"`
	// MaxWaitNanos is the longest wait the caller accepts.
	MaxWaitNanos int64 `json:"max_wait_ns"`
}

// ReserveResponse is the value of a reserve completion.
//
// ok: Granted is true, WaitNanos is the server's wait_ns (relative to when
// the answer was received, which is the completion's TimeNanos or earlier).
// fail: either a refusal by the register (Granted false, RetryAfterNanos
// >= 1; Error may carry the server's message) or a definite error (Error
// set, RetryAfterNanos 0). info: Error says why the outcome is unknown.
type ReserveResponse struct {
	// Granted reports that the permits were reserved.
	Granted bool `json:"granted"`
	// WaitNanos is how long after receiving the answer the permits may be
	// used (granted only).
	WaitNanos int64 `json:"wait_ns,omitempty"`
	// ExpiresInNanos is the server's expires_in_ns (granted only, 0 = none).
	ExpiresInNanos int64 `json:"expires_in_ns,omitempty"`
	// SpacingNanos is the server's spacing_ns (granted only): permit j of
	// the grant may be used from WaitNanos + j·SpacingNanos after the
	// answer was received. 0: the permits are used together.
	SpacingNanos int64 `json:"spacing_ns,omitempty"`
	// RetryAfterNanos is the server's retry_after_ns (refused only).
	RetryAfterNanos int64 `json:"retry_after_ns,omitempty"`
	// Duplicate reports that the server replayed an earlier decision on
	// the same request ID.
	Duplicate bool `json:"duplicate,omitempty"`
	// Error describes a failure or an unknown outcome.
	Error string `json:"error,omitempty"`
	// KeysFull (fail) reports a reserve on a key a template would create,
	// refused because the template's or the register's cap on live keys
	// was reached (429 keys_full): nothing was created or reserved, and
	// RetryAfterNanos says when a key may go, not when a slot is free.
	KeysFull bool `json:"keys_full,omitempty"`
}

// Refused reports whether r is a refusal by the register's pacer (it
// carries a retry_after and is not KeysFull), as opposed to an error or a
// full key cap.
func (r ReserveResponse) Refused() bool { return !r.Granted && r.RetryAfterNanos > 0 && !r.KeysFull }

// LimitRequest is the value of a put or delete invoke.
type LimitRequest struct {
	// Limit is the limit's name.
	Limit string `json:"limit"`
	// Config is the limit's configuration as sent (put only), free-form.
	Config map[string]any `json:"config,omitempty"`
}

// PutRequest is the value of a put invoke of limit name with spec: the
// configuration is spec's JSON, the body the client sends (a Go client's
// client.LimitSpec), so that the record is what went to the register and
// not a second spelling of it.
func PutRequest(name string, spec json.Marshaler) LimitRequest {
	conf := map[string]any{}
	b, err := spec.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(b, &conf)
	}
	if err != nil {
		conf = map[string]any{"unencodable": err.Error()}
	}
	return LimitRequest{Limit: name, Config: conf}
}

// NemesisValue is the value of a nemesis invoke (the fault) and, optionally,
// of its completion.
type NemesisValue struct {
	// Fault names the fault, for example "partition", "kill", "pause".
	Fault string `json:"fault"`
	// Targets are the nodes affected.
	Targets []string `json:"targets,omitempty"`
	// Detail is free text.
	Detail string `json:"detail,omitempty"`
}

// APICallValue is the value of an api-call op (a worker's call to the fake
// API); the op's RequestID is the grant being spent.
type APICallValue struct {
	// Worker names the worker.
	Worker string `json:"worker,omitempty"`
	// Permit is which permit (0-based) of the grant the call spends.
	Permit int64 `json:"permit,omitempty"`
	// Status is the HTTP status the API answered (completion only).
	Status int `json:"status,omitempty"`
	// Error describes a failure.
	Error string `json:"error,omitempty"`
}
