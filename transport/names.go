package transport

import (
	"fmt"

	"github.com/permitd/permitd/fsm"
)

// MaxNameLen is the longest limit name or server id accepted; it equals
// fsm.MaxNameLen.
const MaxNameLen = fsm.MaxNameLen

// MaxRequestIDLen is the longest request id accepted; it equals
// fsm.MaxRequestIDLen.
const MaxRequestIDLen = fsm.MaxRequestIDLen

// allowedRequestIDChars documents request ids in error messages.
const allowedRequestIDChars = "1-64 characters of A-Z a-z 0-9 _ . : -"

// allowedNameChars documents the character set of names in error messages.
const allowedNameChars = "1-128 characters of A-Z a-z 0-9 _ . : -"

// validateName checks that s is 1–128 bytes of [A-Za-z0-9_.:-], the rule
// of fsm.ValidateName. what names the thing in the error ("limit name",
// "server id").
func validateName(what, s string) error {
	return validateChars(what, s, MaxNameLen, allowedNameChars)
}

// validateRequestID checks that s is 1–64 bytes of [A-Za-z0-9_.:-]: the
// length bound of fsm.ValidateRequestID, with the character set of names.
func validateRequestID(s string) error {
	return validateChars("request id", s, MaxRequestIDLen, allowedRequestIDChars)
}

func validateChars(what, s string, maxLen int, allowed string) error {
	if s == "" {
		return fmt.Errorf("%s is empty; allowed: %s", what, allowed)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%s is %d bytes long; allowed: %s", what, len(s), allowed)
	}
	for i := 0; i < len(s); i++ {
		if !fsm.IsNameByte(s[i]) {
			return fmt.Errorf("%s %s: byte %q at offset %d is not allowed; allowed: %s", what, strconvQuote(s), s[i], i, allowed)
		}
	}
	return nil
}
