package bucket

import "fmt"

// Helpers shared by the Scheduler methods of every pacer (ReserveAt and
// Charge, see api.go and doc.go, "Serving at a chosen time").

// checkChargePermits validates the count of a Charge: any n >= 1, since a
// settled overrun may exceed what one request could be granted.
func checkChargePermits(c *Config, n int64) error {
	if n < 1 {
		return fmt.Errorf("bucket: charge of %d permits: %w (allowed: >= 1; a charge may exceed the %d a %s request can be granted)",
			n, ErrInvalidPermits, c.MaxPermits(), c.Spec.Algorithm)
	}
	return nil
}

// errChargeOverflow is the error of a Charge whose cost would run past the
// end of the int64 timeline.
func errChargeOverflow(c *Config, nowNanos, n int64) error {
	return fmt.Errorf("bucket: charge of %d permits at %d on a %s limit: %w (the cost of %d permits of %d ns each would push its next free time past the end of the int64 timeline)",
		n, nowNanos, c.Spec.Algorithm, ErrOverflow, n, c.IntervalNanos)
}
