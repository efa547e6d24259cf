package fakeapi

// CallRequest is the body of POST /call.
type CallRequest struct {
	// Worker names the caller (required, at most 256 bytes).
	Worker string `json:"worker"`
	// RequestID is the request ID of the grant being spent (may be empty
	// for a call made without a grant, which the checkers flag).
	RequestID string `json:"request_id"`
	// SentNanos is the caller's monotonic clock when it sent the call, in
	// its own time base; used to measure delivery jitter.
	SentNanos *int64 `json:"sent_ns,omitempty"`
	// Permit, if given, is which permit (0-based) of the grant the call
	// spends: a grant of n permits has permits 0 to n-1, each usable
	// once, permit j from its own ready time.
	Permit *int64 `json:"permit,omitempty"`
	// Tokens (Multi mode) is the call's actual token cost (>= 1).
	Tokens *int64 `json:"tokens,omitempty"`
	// DurationNanos (Multi mode) is how long the call lasts: the server
	// answers it that long after receiving it (0 to 10 s).
	DurationNanos *int64 `json:"duration_ns,omitempty"`
	// Key (Keyed mode, required there) names the limit whose permit the
	// call spends, for example a templated key "jlt:k7".
	Key string `json:"key,omitempty"`
}

// Call is one call the API received.
type Call struct {
	// Seq is the call's position, from 0, in receive order.
	Seq int64 `json:"seq"`
	// Worker names the caller.
	Worker string `json:"worker"`
	// RequestID is the grant the caller spent.
	RequestID string `json:"request_id,omitempty"`
	// SentNanos is the caller's send time in the caller's time base, if
	// given.
	SentNanos *int64 `json:"sent_ns,omitempty"`
	// Permit is the permit of the grant the caller said it spent, if it
	// said (CallRequest.Permit).
	Permit *int64 `json:"permit,omitempty"`
	// TimeNanos is the receive time, monotonic ns since Config.Start.
	TimeNanos int64 `json:"time_ns"`
	// Tokens and DurationNanos echo the request (Multi mode); EndNanos is
	// when the call ended (the server stamped it before answering; nil
	// while in progress).
	Tokens        *int64 `json:"tokens,omitempty"`
	DurationNanos *int64 `json:"duration_ns,omitempty"`
	EndNanos      *int64 `json:"end_ns,omitempty"`
	// Key is the limit the call spends a permit of (Keyed mode).
	Key string `json:"key,omitempty"`
}

// Stats are the live monitor's counts.
type Stats struct {
	// Mode, IntervalNanos, WindowNanos, ToleranceNanos echo the config.
	Mode           Mode  `json:"mode"`
	IntervalNanos  int64 `json:"interval_ns,omitempty"`
	WindowNanos    int64 `json:"window_ns,omitempty"`
	ToleranceNanos int64 `json:"tolerance_ns"`
	// Formula is the window bound's formula and Bound its value for
	// WindowNanos (Window mode).
	Formula string `json:"formula,omitempty"`
	Bound   int64  `json:"bound,omitempty"`
	// Calls is the number of calls recorded; Dropped the calls refused
	// because MaxCalls was reached.
	Calls   int64 `json:"calls"`
	Dropped int64 `json:"dropped"`
	// Violations counts calls that broke the limit (see the package doc).
	Violations int64 `json:"violations"`
	// MinGapNanos is the smallest gap between consecutive calls (-1 with
	// fewer than two calls).
	MinGapNanos int64 `json:"min_gap_ns"`
	// MaxWindowCount is the most calls seen in one window (Window mode).
	MaxWindowCount int64 `json:"max_window_count,omitempty"`
	// Multi is the multi-dimension judge's counts (Multi mode).
	Multi *MultiStats `json:"multi,omitempty"`
	// Keys is the number of distinct keys called (Keyed mode); the other
	// counts are then summed (Violations, Calls) or the extreme
	// (MinGapNanos, MaxWindowCount) over the keys, each judged alone.
	Keys int64 `json:"keys,omitempty"`
}
