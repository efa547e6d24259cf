package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Side names, as they appear in the table and the JSON.
const (
	sideRedis   = "redis"
	sidePermitd = "permitd"
)

// maybeFloat is a float64 that encodes to JSON as null when it is NaN or
// infinite (encoding/json refuses those).
type maybeFloat float64

// MarshalJSON encodes f as a number, or null when it is not finite.
func (f maybeFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// sideSummary is one side at one concurrency, over all its rounds.
type sideSummary struct {
	Rounds        int        `json:"rounds"`
	Seconds       float64    `json:"seconds"`
	Decisions     int64      `json:"decisions"`
	Granted       int64      `json:"granted"`
	Refused       int64      `json:"refused"`
	Errors        int64      `json:"errors"`
	ThroughputDPS float64    `json:"throughput_dps"`
	P50Ms         maybeFloat `json:"p50_ms"`
	P99Ms         maybeFloat `json:"p99_ms"`
	MaxMs         maybeFloat `json:"max_ms"`
	FirstError    string     `json:"first_error,omitempty"`
	// CPU used in the measured windows: seconds in all, cores on average
	// (seconds per wall second), and microseconds per decision, by the
	// side's server processes and by the load generator.
	ServerCPUSec      maybeFloat `json:"server_cpu_s"`
	ServerCores       maybeFloat `json:"server_cores"`
	ServerCPUUsPerDec maybeFloat `json:"server_cpu_us_per_decision"`
	ClientCPUSec      maybeFloat `json:"client_cpu_s"`
	ClientCores       maybeFloat `json:"client_cores"`
	ClientCPUUsPerDec maybeFloat `json:"client_cpu_us_per_decision"`
}

// comparison is both sides at one concurrency.
type comparison struct {
	Concurrency int         `json:"concurrency"`
	Redis       sideSummary `json:"redis"`
	Permitd     sideSummary `json:"permitd"`
	// Ratios are permitd / redis (throughput: above 1 means permitd is
	// faster; latency: above 1 means permitd is slower). NaN is reported
	// as null in the JSON.
	ThroughputRatio *float64 `json:"throughput_ratio"`
	P50Ratio        *float64 `json:"p50_ratio"`
	P99Ratio        *float64 `json:"p99_ratio"`
}

// percentileMs is the nearest-rank p-th percentile (0 < p <= 1) of sorted,
// in milliseconds; NaN when sorted is empty.
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// summarize merges the rounds of one side (all at one concurrency).
func summarize(samples []runSample) sideSummary {
	var s sideSummary
	var lat []time.Duration
	var server, client float64
	for _, r := range samples {
		server += float64(r.ServerCPUSec)
		client += float64(r.ClientCPUSec)
		s.Rounds++
		s.Seconds += r.Seconds
		s.Granted += r.Granted
		s.Refused += r.Refused
		s.Errors += r.Errors
		if s.FirstError == "" {
			s.FirstError = r.FirstError
		}
		lat = append(lat, r.latencies...)
	}
	s.Decisions = s.Granted + s.Refused
	if s.Seconds > 0 {
		s.ThroughputDPS = float64(s.Decisions) / s.Seconds
	}
	slices.Sort(lat)
	s.P50Ms = maybeFloat(percentileMs(lat, 0.50))
	s.P99Ms = maybeFloat(percentileMs(lat, 0.99))
	s.MaxMs = maybeFloat(percentileMs(lat, 1))
	nan := math.NaN()
	if s.Rounds == 0 {
		server, client = nan, nan
	}
	s.ServerCPUSec, s.ClientCPUSec = maybeFloat(server), maybeFloat(client)
	s.ServerCores, s.ClientCores = maybeFloat(server/s.Seconds), maybeFloat(client/s.Seconds)
	s.ServerCPUUsPerDec = maybeFloat(server * 1e6 / float64(s.Decisions))
	s.ClientCPUUsPerDec = maybeFloat(client * 1e6 / float64(s.Decisions))
	return s
}

// ratio is a/b, or nil when it is not a finite number.
func ratio(a, b float64) *float64 {
	r := a / b
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	return &r
}

// compare summarizes both sides' samples at each concurrency, in the order
// given.
func compare(concurrencies []int, samples []runSample) []comparison {
	out := make([]comparison, 0, len(concurrencies))
	for _, c := range concurrencies {
		var rs, ps []runSample
		for _, s := range samples {
			if s.Concurrency != c {
				continue
			}
			switch s.Side {
			case sideRedis:
				rs = append(rs, s)
			case sidePermitd:
				ps = append(ps, s)
			}
		}
		if len(rs) == 0 && len(ps) == 0 {
			continue
		}
		cmp := comparison{Concurrency: c, Redis: summarize(rs), Permitd: summarize(ps)}
		if len(rs) == 0 || len(ps) == 0 {
			out = append(out, cmp) // one side was not measured: no ratios
			continue
		}
		cmp.ThroughputRatio = ratio(cmp.Permitd.ThroughputDPS, cmp.Redis.ThroughputDPS)
		cmp.P50Ratio = ratio(float64(cmp.Permitd.P50Ms), float64(cmp.Redis.P50Ms))
		cmp.P99Ratio = ratio(float64(cmp.Permitd.P99Ms), float64(cmp.Redis.P99Ms))
		out = append(out, cmp)
	}
	return out
}

// fmtMs formats a latency in milliseconds with 3 significant-ish decimals.
func fmtMs(f maybeFloat) string {
	ms := float64(f)
	switch {
	case math.IsNaN(ms):
		return "–"
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f", ms)
	case ms >= 1:
		return fmt.Sprintf("%.2f", ms)
	default:
		return fmt.Sprintf("%.3f", ms)
	}
}

// fmtRatio formats a ratio as "0.42×", or "–" when there is none.
func fmtRatio(r *float64) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f×", *r)
}

// writeTable writes the comparisons as a markdown table. Errors and refusals
// share a column ("errors/refused"): both should be 0.
func writeTable(w io.Writer, cmps []comparison) error {
	var b strings.Builder
	b.WriteString("| concurrency | redis decisions/s | redis p50 ms | redis p99 ms | redis err/ref | permitd decisions/s | permitd p50 ms | permitd p99 ms | permitd err/ref | permitd/redis throughput | permitd/redis p50 |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cmps {
		fmt.Fprintf(&b, "| %d | %.0f | %s | %s | %d/%d | %.0f | %s | %s | %d/%d | %s | %s |\n",
			c.Concurrency,
			c.Redis.ThroughputDPS, fmtMs(c.Redis.P50Ms), fmtMs(c.Redis.P99Ms), c.Redis.Errors, c.Redis.Refused,
			c.Permitd.ThroughputDPS, fmtMs(c.Permitd.P50Ms), fmtMs(c.Permitd.P99Ms), c.Permitd.Errors, c.Permitd.Refused,
			fmtRatio(c.ThroughputRatio), fmtRatio(c.P50Ratio))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtCPU formats CPU cores and microseconds per decision as "1.23 (45.6 µs)".
func fmtCPU(cores, usPerDec maybeFloat) string {
	c, u := float64(cores), float64(usPerDec)
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return "–"
	}
	if math.IsNaN(u) || math.IsInf(u, 0) {
		return fmt.Sprintf("%.2f", c)
	}
	return fmt.Sprintf("%.2f (%.0f µs)", c, u)
}

// writeCPUTable writes, per concurrency, the CPU cores each side's servers
// and the load generator used on average, with CPU microseconds per
// decision: a cheap profile of where the time went.
func writeCPUTable(w io.Writer, cmps []comparison) error {
	var b strings.Builder
	b.WriteString("| concurrency | redis-server cores (CPU/decision) | load generator for redis | permitd agents, 3 together | load generator for permitd |\n")
	b.WriteString("|---:|---:|---:|---:|---:|\n")
	for _, c := range cmps {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", c.Concurrency,
			fmtCPU(c.Redis.ServerCores, c.Redis.ServerCPUUsPerDec), fmtCPU(c.Redis.ClientCores, c.Redis.ClientCPUUsPerDec),
			fmtCPU(c.Permitd.ServerCores, c.Permitd.ServerCPUUsPerDec), fmtCPU(c.Permitd.ClientCores, c.Permitd.ClientCPUUsPerDec))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
