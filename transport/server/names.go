package server

import "github.com/permitd/permitd/transport/api"

// The API's bounds on requests (TestBoundsAreTheRegisters keeps the name
// and request id bounds equal to package fsm's).
const (
	// MaxBodyBytes is the largest request body accepted (1 MiB); larger
	// bodies are answered with 413.
	MaxBodyBytes = api.MaxBodyBytes
	// MaxNameLen is the longest limit name or server id accepted.
	MaxNameLen = api.MaxNameLen
	// MaxRequestIDLen is the longest request id accepted.
	MaxRequestIDLen = api.MaxRequestIDLen
)
