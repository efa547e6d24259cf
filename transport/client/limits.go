package client

import (
	"fmt"
	"time"
)

// The register's bounds on what a client sends, as its HTTP API states
// them. Requests outside them are refused before they are sent (ErrInvalid);
// the register checks them again (a test on the server side keeps the two
// equal).
const (
	// MaxNameLen is the longest limit, holder or group name, in
	// characters of [A-Za-z0-9_.:-].
	MaxNameLen = 128
	// MaxDemandMilliPerSec is the largest demand of a lease, in thousandths
	// of a permit per second (10^9 permits per second).
	MaxDemandMilliPerSec = 1_000_000_000_000
	// MaxLeaseWeight is the largest weight of a group.
	MaxLeaseWeight = 1_000_000
	// MinLeaseTTL and MaxLeaseTTL bound a lease's TTL.
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = 60 * time.Second
)

// ValidateName reports whether name is a valid limit, holder or group name
// (what names it in the error): 1 to MaxNameLen characters of
// [A-Za-z0-9_.:-]. The error wraps ErrInvalid.
func ValidateName(what, name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %s %q has %d characters; allowed: 1-%d characters of [A-Za-z0-9_.:-]", ErrInvalid, what, name, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Errorf("%w: %s %q has %q at offset %d; allowed: 1-%d characters of [A-Za-z0-9_.:-]", ErrInvalid, what, name, c, i, MaxNameLen)
		}
	}
	return nil
}
