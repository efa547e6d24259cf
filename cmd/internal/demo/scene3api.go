package demo

import (
	"math/rand/v2"
	"sync"
	"time"
)

// scene3api.go: the fake LLM API of scene 3. It enforces three
// dimensions on every call, at the moment the call starts:
//
//   - requests: the calls started in the exact sliding window (start-W,
//     start], this one included, at most maxRequests;
//   - tokens: the ACTUAL tokens of those calls (each counted at its start
//     time, as real LLM APIs charge them, though the caller learns the
//     cost only when the call ends), at most maxTokens;
//   - in flight: the calls started and not yet ended, this one included,
//     at most maxInFlight.
//
// A call that would exceed any of them is answered 429 at once, counted,
// and charges nothing (it is not in the window and never in flight).

// llmCall is one call the API accepted: when it started and its tokens.
type llmCall struct {
	at     time.Time
	tokens int64
}

// llmSecond is what the API saw since the previous sample.
type llmSecond struct {
	calls, tokens, rejected int64
	// maxInFlight is the most calls in flight at once; inFlightNanos the
	// integral of the calls in flight over time (calls x nanoseconds).
	maxInFlight   int
	inFlightNanos float64
}

// llmTotals is what the API saw over the whole run.
type llmTotals struct {
	calls, tokens int64
	// rejected counts 429s, and per dimension (a call can exceed several;
	// it is counted under the first that refused: in flight, requests,
	// tokens).
	rejected, rejInFlight, rejRequests, rejTokens int64
	// maxWinRequests and maxWinTokens are the most requests and actual
	// tokens in any window of length W (the max over windows ending at a
	// call start, where it is reached); maxInFlight the most at once.
	maxWinRequests int
	maxWinTokens   int64
	maxInFlight    int
	inFlightNanos  float64
}

// fakeLLM is the API; its methods are safe for concurrent use.
type fakeLLM struct {
	window      time.Duration
	maxRequests int
	maxTokens   int64
	maxInFlight int
	// minTokens..maxCallTokens and minDur..maxDur are the uniform ranges
	// of a call's real cost and duration.
	minTokens, maxCallTokens int64
	minDur, maxDur           time.Duration

	mu       sync.Mutex
	recent   []llmCall // accepted calls started within the window
	winTok   int64     // tokens of recent
	inFlight int
	lastEdge time.Time // when inFlight last changed or was sampled
	sec      llmSecond
	tot      llmTotals
}

// advance integrates the calls in flight up to now (mu held).
func (a *fakeLLM) advance(now time.Time) {
	if !a.lastEdge.IsZero() {
		d := float64(now.Sub(a.lastEdge)) * float64(a.inFlight)
		a.sec.inFlightNanos += d
		a.tot.inFlightNanos += d
	}
	a.lastEdge = now
}

// begin admits a call of tokens actual tokens starting now, or refuses it
// (429) naming the dimension it would exceed.
func (a *fakeLLM) begin(now time.Time, tokens int64) (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance(now)
	cut := now.Add(-a.window)
	k := 0
	for k < len(a.recent) && !a.recent[k].at.After(cut) {
		a.winTok -= a.recent[k].tokens
		k++
	}
	a.recent = a.recent[k:]
	reason := ""
	switch {
	case a.inFlight+1 > a.maxInFlight:
		reason = "in flight"
		a.tot.rejInFlight++
	case len(a.recent)+1 > a.maxRequests:
		reason = "requests"
		a.tot.rejRequests++
	case a.winTok+tokens > a.maxTokens:
		reason = "tokens"
		a.tot.rejTokens++
	}
	if reason != "" {
		a.sec.rejected++
		a.tot.rejected++
		return false, reason
	}
	a.recent = append(a.recent, llmCall{now, tokens})
	a.winTok += tokens
	a.inFlight++
	a.sec.calls++
	a.sec.tokens += tokens
	a.sec.maxInFlight = max(a.sec.maxInFlight, a.inFlight)
	a.tot.calls++
	a.tot.tokens += tokens
	a.tot.maxWinRequests = max(a.tot.maxWinRequests, len(a.recent))
	a.tot.maxWinTokens = max(a.tot.maxWinTokens, a.winTok)
	a.tot.maxInFlight = max(a.tot.maxInFlight, a.inFlight)
	return true, ""
}

// end ends an accepted call.
func (a *fakeLLM) end(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance(now)
	a.inFlight--
}

// Call makes one call: its real cost and duration are drawn at random, it
// is admitted or refused (429) at its start with its actual tokens, and
// it returns when it ends, with the tokens it cost (0 for a 429). A call
// that started runs to its end.
func (a *fakeLLM) Call() (tokens int64, ok bool) {
	tokens = a.minTokens + rand.Int64N(a.maxCallTokens-a.minTokens+1)
	dur := a.minDur + time.Duration(rand.Int64N(int64(a.maxDur-a.minDur)+1))
	if ok, _ := a.begin(time.Now(), tokens); !ok {
		return 0, false
	}
	time.Sleep(dur)
	a.end(time.Now())
	return tokens, true
}

// sample returns what the API saw since the previous sample and starts a
// new second.
func (a *fakeLLM) sample() llmSecond {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance(time.Now())
	s := a.sec
	a.sec = llmSecond{maxInFlight: a.inFlight}
	return s
}

// totals returns what the API saw over the run.
func (a *fakeLLM) totals() llmTotals {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance(time.Now())
	return a.tot
}
