package bench

import (
	"fmt"
	"io"
)

// report.go: what bench reports: counts, throughput over the measured
// time, and latency percentiles (nearest rank: the ceil(p*n)-th smallest
// of n measured latencies), as a table or as JSON.

// Result is bench's report (printed as a table or, with --json, as
// this object).
type Result struct {
	Mode        string  `json:"mode"`
	Protocol    string  `json:"protocol"`
	Concurrency int     `json:"concurrency"`
	OpenRate    float64 `json:"open_rate,omitempty"`
	Servers     string  `json:"servers"`
	Limit       string  `json:"limit"`
	// Keys is --keys: each reserve named Limit:k<i>, i at random below it.
	Keys        int     `json:"keys,omitempty"`
	DurationSec float64 `json:"duration_s"`
	Requests    int64   `json:"requests"`
	Granted     int64   `json:"granted"`
	Refused     int64   `json:"refused"`
	// Shed counts reserves refused at once as overloaded (503): neither
	// errors nor in the latencies, which are the admitted reserves'.
	Shed int64 `json:"shed"`
	// GoodputRPS is the admitted decisions (granted or refused) per
	// second.
	GoodputRPS    float64 `json:"goodput_rps"`
	LeaderBefore  string  `json:"leader_before"`
	TermBefore    uint64  `json:"term_before"`
	LeaderAfter   string  `json:"leader_after"`
	TermAfter     uint64  `json:"term_after"`
	RefusedShare  float64 `json:"refused_share"`
	Errors        int64   `json:"errors"`
	ThroughputRPS float64 `json:"throughput_rps"`
	P50Ms         float64 `json:"p50_ms"`
	P90Ms         float64 `json:"p90_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	FirstError    string  `json:"first_error,omitempty"`
	// Stages is where the reserves spent their time on the leader
	// (stages.go), or StagesError why it is unknown; only the closed and
	// open loops report them.
	Stages      *Stages `json:"stages,omitempty"`
	StagesError string  `json:"stages_error,omitempty"`
}

// PrintResult prints a Result as text.
func PrintResult(w io.Writer, r Result) {
	keys := ""
	if r.Keys > 0 {
		keys = fmt.Sprintf(" keys=%d (%s:k0..k%d at random)", r.Keys, r.Limit, r.Keys-1)
	}
	fmt.Fprintf(w, "mode=%s protocol=%s concurrency=%d servers=%s limit=%s%s duration=%.1fs\n", r.Mode, r.Protocol, r.Concurrency, r.Servers, r.Limit, keys, r.DurationSec)
	fmt.Fprintf(w, "requests=%d granted=%d refused=%d (%.2f%%) shed=%d errors=%d\n", r.Requests, r.Granted, r.Refused, 100*r.RefusedShare, r.Shed, r.Errors)
	fmt.Fprintf(w, "goodput=%.0f decisions/s  leader %s (term %d) before, %s (term %d) after\n", r.GoodputRPS, r.LeaderBefore, r.TermBefore, r.LeaderAfter, r.TermAfter)
	fmt.Fprintf(w, "throughput=%.0f req/s  latency p50=%.3fms p90=%.3fms p99=%.3fms p99.9=%.3fms max=%.3fms\n", r.ThroughputRPS, r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	printStages(w, r)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
}

// share is part/total, 0 for an empty total.
func share(part, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(part) / float64(total)
}
