package api

import "fmt"

// The register's names and request IDs, as the HTTP API checks them. The
// bounds are the register's (package transport/server's tests keep them equal to
// package fsm's); this package does not import it, so that the worker's
// sidecar, which shares it, stays out of the server's packages.
const (
	// MaxNameLen is the longest limit, holder or group name or server id.
	MaxNameLen = 128
	// MaxRequestIDLen is the longest request id.
	MaxRequestIDLen = 64
	// AllowedNameChars documents names in error messages.
	AllowedNameChars = "1-128 characters of A-Z a-z 0-9 _ . : -"
	// AllowedRequestIDChars documents request ids in error messages.
	AllowedRequestIDChars = "1-64 characters of A-Z a-z 0-9 _ . : -"
)

// ValidateName checks that s is 1-128 bytes of [A-Za-z0-9_.:-]. what names
// the thing in the error ("limit name", "server id").
func ValidateName(what, s string) error {
	return validateChars(what, s, MaxNameLen, AllowedNameChars)
}

// ValidateRequestID checks that s is 1-64 bytes of [A-Za-z0-9_.:-].
func ValidateRequestID(s string) error {
	return validateChars("request id", s, MaxRequestIDLen, AllowedRequestIDChars)
}

func validateChars(what, s string, maxLen int, allowed string) error {
	if s == "" {
		return fmt.Errorf("%s is empty; allowed: %s", what, allowed)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%s is %d bytes long; allowed: %s", what, len(s), allowed)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Errorf("%s %s: byte %q at offset %d is not allowed; allowed: %s", what, Quote(s), s[i], i, allowed)
		}
	}
	return nil
}
