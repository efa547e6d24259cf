package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Side names, as they appear in the tables and the JSON: the peers, and
// permitd by --protocol (protocolBinary, protocolClient, protocolHTTP).
const (
	sideRedis   = "redis"
	sideEtcd    = "etcd"
	sideRaft    = "raft"
	sideNetHTTP = "nethttp" // the net/http ceiling (nethttpside.go)
)

// isPeer reports whether side is one of the peers permitd is compared with.
func isPeer(side string) bool {
	return side == sideRedis || side == sideEtcd || side == sideRaft || side == sideNetHTTP
}

// sideTitle is a side's column title in the summary table.
func sideTitle(side string) string {
	switch side {
	case sideRedis:
		return "Redis"
	case sideEtcd:
		return "etcd"
	case sideNetHTTP:
		return "net/http ceiling"
	case protocolHTTP:
		return "HTTP"
	}
	return side
}

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

// comparison is every side at one concurrency.
type comparison struct {
	Concurrency int          `json:"concurrency"`
	Sides       []sideResult `json:"sides"`
	// Ratios are permitd / peer for each permitd protocol and peer that
	// were both measured.
	Ratios []ratioResult `json:"ratios"`
}

// sideResult is one side's summary at one concurrency.
type sideResult struct {
	Side string `json:"side"`
	sideSummary
}

// ratioResult compares one permitd protocol with one peer at one
// concurrency. Throughput above 1 means permitd is faster; p50 above 1
// means permitd is slower. Missing ratios are null in the JSON.
type ratioResult struct {
	Permitd string `json:"permitd"`
	Peer    string `json:"peer"`
	// Throughput and P50 are over all rounds together.
	Throughput *float64 `json:"throughput"`
	P50        *float64 `json:"p50"`
	// PerRound is the throughput ratio of each round (the two sides'
	// runs of round r, which ran next to each other); Min and Max are
	// its extremes.
	PerRound []maybeFloat `json:"throughput_per_round"`
	Min      *float64     `json:"throughput_min"`
	Max      *float64     `json:"throughput_max"`
	// P50PerRound is the p50 ratio of each round (above 1: permitd is
	// slower), P50Min and P50Max its extremes: the summary table shows
	// them against the raft peer, whose latency is permitd's floor.
	P50PerRound []maybeFloat `json:"p50_per_round"`
	P50Min      *float64     `json:"p50_min"`
	P50Max      *float64     `json:"p50_max"`
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

// compare summarizes the samples of each side (in the order of sides) at
// each concurrency (in the order given), and the ratios of every permitd
// side to every peer side, grouped by peer.
func compare(concurrencies []int, sides []string, samples []runSample) []comparison {
	out := make([]comparison, 0, len(concurrencies))
	for _, c := range concurrencies {
		bySide := map[string][]runSample{}
		for _, s := range samples {
			if s.Concurrency == c {
				bySide[s.Side] = append(bySide[s.Side], s)
			}
		}
		if len(bySide) == 0 {
			continue
		}
		cmp := comparison{Concurrency: c}
		sums := map[string]sideSummary{}
		for _, side := range sides {
			sums[side] = summarize(bySide[side])
			cmp.Sides = append(cmp.Sides, sideResult{Side: side, sideSummary: sums[side]})
		}
		for _, peer := range sides {
			if !isPeer(peer) || len(bySide[peer]) == 0 {
				continue
			}
			for _, p := range sides {
				if isPeer(p) || len(bySide[p]) == 0 {
					continue
				}
				cmp.Ratios = append(cmp.Ratios, ratioOf(p, peer, sums, bySide))
			}
		}
		out = append(out, cmp)
	}
	return out
}

// ratioOf is permitd side p against peer: over all rounds, and per round.
func ratioOf(p, peer string, sums map[string]sideSummary, bySide map[string][]runSample) ratioResult {
	r := ratioResult{Permitd: p, Peer: peer,
		Throughput: ratio(sums[p].ThroughputDPS, sums[peer].ThroughputDPS),
		P50:        ratio(float64(sums[p].P50Ms), float64(sums[peer].P50Ms))}
	peerRounds := map[int]runSample{}
	for _, s := range bySide[peer] {
		peerRounds[s.Round] = s
	}
	for _, s := range bySide[p] {
		ps, ok := peerRounds[s.Round]
		if !ok {
			continue
		}
		q := ratio(float64(s.Granted+s.Refused)/s.Seconds, float64(ps.Granted+ps.Refused)/ps.Seconds)
		if q == nil {
			r.PerRound = append(r.PerRound, maybeFloat(math.NaN()))
			continue
		}
		r.PerRound = append(r.PerRound, maybeFloat(*q))
		r.Min, r.Max = extend(r.Min, r.Max, q)
	}
	for _, s := range bySide[p] {
		ps, ok := peerRounds[s.Round]
		if !ok {
			continue
		}
		q := ratio(sampleP50(s), sampleP50(ps))
		if q == nil {
			r.P50PerRound = append(r.P50PerRound, maybeFloat(math.NaN()))
			continue
		}
		r.P50PerRound = append(r.P50PerRound, maybeFloat(*q))
		r.P50Min, r.P50Max = extend(r.P50Min, r.P50Max, q)
	}
	return r
}

// extend widens the range [lo, hi] (nil: empty) to hold q.
func extend(lo, hi, q *float64) (*float64, *float64) {
	if lo == nil || *q < *lo {
		lo = q
	}
	if hi == nil || *q > *hi {
		hi = q
	}
	return lo, hi
}

// sampleP50 is one run's median latency in milliseconds (NaN if none).
func sampleP50(s runSample) float64 {
	lat := slices.Clone(s.latencies)
	slices.Sort(lat)
	return percentileMs(lat, 0.5)
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

// fmtRatio formats a ratio to two decimals below 10, one below 100, none
// above.
func fmtRatio(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

// fmtRange formats a ratio's per-round extremes as "0.03–0.07", one
// value when they are equal as formatted, or "–" when there are none:
// the throughput ratio's, or against the raft peer the p50 ratio's.
func fmtRange(r ratioResult) string {
	lo0, hi0 := r.Min, r.Max
	if r.Peer == sideRaft {
		lo0, hi0 = r.P50Min, r.P50Max
	}
	if lo0 == nil || hi0 == nil {
		return "–"
	}
	lo, hi := fmtRatio(*lo0), fmtRatio(*hi0)
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// fmtRate formats decisions per second with thin groups of thousands:
// "12 700/s", rounded to three significant digits above 1 000.
func fmtRate(dps float64) string {
	if math.IsNaN(dps) || dps <= 0 {
		return "0/s"
	}
	n := int64(math.Round(dps))
	if n >= 1000 {
		p := int64(math.Pow(10, math.Floor(math.Log10(float64(n)))-2))
		n = (n + p/2) / p * p
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(ch)
	}
	return b.String() + "/s"
}

// writeTable writes the summary table of the shape: per
// concurrency, every side's decisions per second, then each permitd
// protocol's throughput ratio to each peer as the range over the rounds.
func writeTable(w io.Writer, cmps []comparison) error {
	if len(cmps) == 0 {
		return nil
	}
	var b strings.Builder
	head, rule := []string{"concurrency"}, []string{"---:"}
	for _, s := range cmps[0].Sides {
		head, rule = append(head, sideTitle(s.Side)), append(rule, "---:")
	}
	for _, r := range cmps[0].Ratios {
		title := sideTitle(r.Permitd) + " / " + sideTitle(r.Peer)
		if r.Peer == sideRaft {
			title = sideTitle(r.Permitd) + " p50 / raft p50"
		}
		head, rule = append(head, title), append(rule, "---")
	}
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Join(rule, "|") + "|\n")
	for _, c := range cmps {
		row := []string{strconv.Itoa(c.Concurrency)}
		for _, s := range c.Sides {
			row = append(row, fmtRate(s.ThroughputDPS))
		}
		for _, r := range c.Ratios {
			row = append(row, fmtRange(r))
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
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

// writeDetailTable writes, per concurrency and side, decisions per
// second, p50 and p99 latency, errors and refusals (both should be 0), and
// the CPU cores the side's servers and the load generator used on average,
// with CPU microseconds per decision: a cheap profile of where the time
// went.
func writeDetailTable(w io.Writer, cmps []comparison) error {
	var b strings.Builder
	b.WriteString("| concurrency | side | decisions/s | p50 ms | p99 ms | err/ref | server cores (CPU/decision) | load generator cores (CPU/decision) |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cmps {
		for _, s := range c.Sides {
			fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %d/%d | %s | %s |\n", c.Concurrency, s.Side,
				s.ThroughputDPS, fmtMs(s.P50Ms), fmtMs(s.P99Ms), s.Errors, s.Refused,
				fmtCPU(s.ServerCores, s.ServerCPUUsPerDec), fmtCPU(s.ClientCores, s.ClientCPUUsPerDec))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
