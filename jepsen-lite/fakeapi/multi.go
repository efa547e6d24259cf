package fakeapi

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/permitd/permitd/jepsen-lite/bound"
)

// multi.go: Multi mode, a fake API limited in three dimensions at once,
// as an LLM API is by requests per minute, tokens per minute and requests
// in flight. Each call carries its token cost and lasts DurationNanos; the
// server stamps its start (receive) and its end (before answering) with
// its one monotonic clock, and the judge counts, per dimension, the calls
// that break:
//
//   - spacing (the strict limit): two call starts closer than
//     SpacingNanos - SpacingToleranceNanos;
//   - tokens (the bursty limit): for each W in TokenWindowsNanos, the sum
//     of the tokens of the calls started in a closed window of length
//     W - TokenToleranceNanos ending at a call's start greater than
//     TokenBound.Max(W) (each over-full window's last call is one
//     violation);
//   - in flight (the concurrency limit): more than MaxInFlight calls in
//     progress when one starts (a call is in progress from its start to
//     its end stamp).

// MultiSpec configures the multi-dimension judge.
type MultiSpec struct {
	// SpacingNanos is the strict limit's spacing at use, I - expiry.
	SpacingNanos          int64 `json:"spacing_ns"`
	SpacingToleranceNanos int64 `json:"spacing_tolerance_ns"`
	// TokenBound is the bursty token limit's window bound and
	// TokenWindowsNanos the window lengths it is judged over.
	TokenBound          bound.Bound `json:"-"`
	TokenFormula        string      `json:"token_formula"`
	TokenWindowsNanos   []int64     `json:"token_windows_ns"`
	TokenToleranceNanos int64       `json:"token_tolerance_ns"`
	// MaxInFlight is the concurrency limit's max_in_flight.
	MaxInFlight int64 `json:"max_in_flight"`
}

func (m *MultiSpec) validate() error {
	switch {
	case m.SpacingNanos <= 0:
		return fmt.Errorf("%w: multi spacing %d ns; allowed: > 0", ErrInvalid, m.SpacingNanos)
	case m.MaxInFlight <= 0:
		return fmt.Errorf("%w: multi max in flight %d; allowed: > 0", ErrInvalid, m.MaxInFlight)
	case len(m.TokenWindowsNanos) == 0:
		return fmt.Errorf("%w: multi token windows: none; allowed: one or more lengths > 0", ErrInvalid)
	case m.SpacingToleranceNanos < 0 || m.TokenToleranceNanos < 0:
		return fmt.Errorf("%w: multi tolerances %d, %d ns; allowed: >= 0", ErrInvalid, m.SpacingToleranceNanos, m.TokenToleranceNanos)
	}
	for _, w := range m.TokenWindowsNanos {
		if w <= 0 {
			return fmt.Errorf("%w: multi token window %d ns; allowed: > 0", ErrInvalid, w)
		}
	}
	if err := m.TokenBound.Validate(); err != nil {
		return fmt.Errorf("%w: multi token bound: %w", ErrInvalid, err)
	}
	m.TokenFormula = m.TokenBound.Formula
	return nil
}

// Dimensions of the multi judge (MultiViolation.Dimension).
const (
	DimSpacing  = "spacing"
	DimTokens   = "tokens"
	DimInFlight = "in-flight"
)

// MultiViolation is one call that broke one dimension.
type MultiViolation struct {
	Dimension string
	Detail    string
}

// TokenWindowMax is the fullest token window seen for one W.
type TokenWindowMax struct {
	WindowNanos int64 `json:"window_ns"`
	Bound       int64 `json:"bound"`
	MaxTokens   int64 `json:"max_tokens"`
	EndNanos    int64 `json:"end_ns"`
}

// MultiStats are the multi judge's counts.
type MultiStats struct {
	Spec   MultiSpec `json:"spec"`
	Calls  int64     `json:"calls"`
	Ended  int64     `json:"ended"`
	Tokens int64     `json:"tokens"`
	// Violations per dimension.
	SpacingViolations  int64 `json:"spacing_violations"`
	TokenViolations    int64 `json:"token_violations"`
	InFlightViolations int64 `json:"in_flight_violations"`
	// MinGapNanos is the smallest gap between call starts (-1: fewer
	// than two calls); MaxInFlight the most calls seen in progress.
	MinGapNanos  int64            `json:"min_gap_ns"`
	MaxInFlight  int64            `json:"max_in_flight_seen"`
	TokenWindows []TokenWindowMax `json:"token_windows"`
}

// Violations is the total over the dimensions.
func (s MultiStats) Violations() int64 {
	return s.SpacingViolations + s.TokenViolations + s.InFlightViolations
}

// MultiJudge judges calls fed in time order (Start and End events, an
// End before a Start at the same time). Not safe for concurrent use.
type MultiJudge struct {
	spec     MultiSpec
	last     int64
	recent   []tokenStart // starts within the longest window, oldest first
	inFlight int64
	st       MultiStats
}

type tokenStart struct{ t, tokens int64 }

// NewMultiJudge returns a judge for spec.
func NewMultiJudge(spec MultiSpec) (*MultiJudge, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	j := &MultiJudge{spec: spec, st: MultiStats{Spec: spec, MinGapNanos: -1}}
	for _, w := range spec.TokenWindowsNanos {
		j.st.TokenWindows = append(j.st.TokenWindows, TokenWindowMax{WindowNanos: w, Bound: spec.TokenBound.Max(w)})
	}
	return j, nil
}

// Start judges a call of tokens starting at t and returns the dimensions
// it broke.
func (j *MultiJudge) Start(t, tokens int64) []MultiViolation {
	var out []MultiViolation
	if j.st.Calls > 0 {
		gap := t - j.last
		if j.st.MinGapNanos < 0 || gap < j.st.MinGapNanos {
			j.st.MinGapNanos = gap
		}
		if gap < j.spec.SpacingNanos-j.spec.SpacingToleranceNanos {
			j.st.SpacingViolations++
			out = append(out, MultiViolation{DimSpacing, fmt.Sprintf("started %v after the previous call; the strict limit allows %v - tolerance %v",
				time.Duration(gap), time.Duration(j.spec.SpacingNanos), time.Duration(j.spec.SpacingToleranceNanos))})
		}
	}
	j.st.Calls++
	j.st.Tokens += tokens
	j.last = max(j.last, t)
	longest := slices.Max(j.spec.TokenWindowsNanos)
	drop := 0
	for drop < len(j.recent) && t-j.recent[drop].t > longest {
		drop++
	}
	j.recent = append(j.recent[drop:], tokenStart{t, tokens})
	if cap(j.recent) > 2*len(j.recent)+64 {
		j.recent = slices.Clone(j.recent)
	}
	for k, w := range j.spec.TokenWindowsNanos {
		span := max(w-j.spec.TokenToleranceNanos, 0)
		var sum int64
		for i := len(j.recent) - 1; i >= 0 && t-j.recent[i].t <= span; i-- {
			sum += j.recent[i].tokens
		}
		tw := &j.st.TokenWindows[k]
		if sum > tw.MaxTokens {
			tw.MaxTokens, tw.EndNanos = sum, t
		}
		if sum > tw.Bound {
			j.st.TokenViolations++
			out = append(out, MultiViolation{DimTokens, fmt.Sprintf("%d tokens started within %v (window %v - tolerance %v); bound %s = %d",
				sum, time.Duration(span), time.Duration(w), time.Duration(j.spec.TokenToleranceNanos), j.spec.TokenBound.Formula, tw.Bound)})
		}
	}
	j.inFlight++
	j.st.MaxInFlight = max(j.st.MaxInFlight, j.inFlight)
	if j.inFlight > j.spec.MaxInFlight {
		j.st.InFlightViolations++
		out = append(out, MultiViolation{DimInFlight, fmt.Sprintf("%d calls in progress; max_in_flight %d", j.inFlight, j.spec.MaxInFlight)})
	}
	return out
}

// End records that a call in progress ended.
func (j *MultiJudge) End() {
	if j.inFlight > 0 {
		j.inFlight--
	}
	j.st.Ended++
}

// Stats returns the counts so far.
func (j *MultiJudge) Stats() MultiStats {
	st := j.st
	st.TokenWindows = slices.Clone(j.st.TokenWindows)
	return st
}

// maxCallDuration bounds CallRequest.DurationNanos.
const maxCallDuration = int64(10 * time.Second)

// checkMultiCall checks a call's Multi mode fields.
func (s *Server) checkMultiCall(req CallRequest) error {
	if s.multi == nil {
		if req.Tokens != nil || req.DurationNanos != nil {
			return fmt.Errorf("%w: tokens and duration_ns apply only to mode %q (this server: %q)", ErrInvalid, Multi, s.cfg.Mode)
		}
		return nil
	}
	if req.Tokens == nil || *req.Tokens < 1 {
		return fmt.Errorf("%w: tokens missing or < 1; allowed: the call's actual token cost, >= 1", ErrInvalid)
	}
	if req.DurationNanos == nil || *req.DurationNanos < 0 || *req.DurationNanos > maxCallDuration {
		return fmt.Errorf("%w: duration_ns missing or out of range; allowed: 0 to %d", ErrInvalid, maxCallDuration)
	}
	return nil
}

// endCall waits out call c's duration (from its receive stamp) and stamps
// its end; the call is then no longer in progress. A client that goes
// away does not end it early: the call runs its course.
func (s *Server) endCall(_ context.Context, c Call) Call {
	if d := time.Until(s.cfg.Start.Add(time.Duration(c.TimeNanos + *c.DurationNanos))); d > 0 {
		time.Sleep(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := max(s.Now(), c.TimeNanos)
	if int(c.Seq) < len(s.calls) {
		s.calls[c.Seq].EndNanos = &end
	}
	s.multi.End()
	v := end
	c.EndNanos = &v
	return c
}
