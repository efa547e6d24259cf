package bucket

import "fmt"

// checks.go: the argument checks every pacer shares: the permits of a
// request and of a charge (Scheduler.Charge, see doc.go, "Serving at a
// chosen time"), a maximum wait, and a reconfiguration's config.

// checkPermits validates a permit count: 1 <= n <= c.MaxPermits().
func checkPermits(c *Config, n int64) error {
	if n <= 0 {
		return fmt.Errorf("bucket: %d permits: %w (allowed: 1 to %d)", n, ErrInvalidPermits, c.MaxPermits())
	}
	if m := c.MaxPermits(); n > m {
		return fmt.Errorf("bucket: %d permits: %w (this %s limit grants at most %d at once)", n, ErrTooManyPermits, c.Spec.Algorithm, m)
	}
	return nil
}

// checkMaxWait validates the maxWait of a Reserve: >= 0.
func checkMaxWait(maxWaitNanos int64) error {
	if maxWaitNanos < 0 {
		return fmt.Errorf("bucket: maxWait %d ns: %w (allowed: >= 0)", maxWaitNanos, ErrInvalidDuration)
	}
	return nil
}

// checkAlgorithm checks that the config given to Reconfigure is of the
// pacer's algorithm.
func checkAlgorithm(old Algorithm, c Config) error {
	if c.Spec.Algorithm != old {
		return fmt.Errorf("bucket: reconfigure a %s pacer with a %s config: %w (the algorithm cannot change; create a new pacer)", old, c.Spec.Algorithm, ErrInvalidAlgorithm)
	}
	return nil
}

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
