package checker

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about a checker's input (not about
// the system under test, which is reported in a Result).
var ErrInvalid = errors.New("checker: invalid input")

// MaxViolations bounds Result.Violations; Details["violations_total"] has
// the full count.
const MaxViolations = 20

// Result is a checker's verdict.
type Result struct {
	// Name names the checker.
	Name string `json:"name"`
	// Valid reports that no violation was found.
	Valid bool `json:"valid"`
	// Violations describes the first MaxViolations violations.
	Violations []string `json:"violations,omitempty"`
	// Details holds the measurements behind the verdict (worst cases,
	// counts, the formula and tolerance used). Always includes
	// "violations_total".
	Details map[string]any `json:"details"`
}

// newResult returns a valid Result named name.
func newResult(name string) Result {
	return Result{Name: name, Valid: true, Details: map[string]any{"violations_total": 0}}
}

// violate records a violation.
func (r *Result) violate(format string, args ...any) {
	r.Valid = false
	n, _ := r.Details["violations_total"].(int)
	r.Details["violations_total"] = n + 1
	if len(r.Violations) < MaxViolations {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// String summarises the result on one line.
func (r Result) String() string {
	if r.Valid {
		return r.Name + ": valid"
	}
	n, _ := r.Details["violations_total"].(int)
	s := fmt.Sprintf("%s: INVALID (%d violations)", r.Name, n)
	if len(r.Violations) > 0 {
		s += ": " + r.Violations[0]
	}
	return s
}

// ViolationsTotal is the number of violations found, including those not
// listed in Violations.
func (r Result) ViolationsTotal() int {
	n, _ := r.Details["violations_total"].(int)
	return n
}
