package main

// The human views of limits list (a table, one row per limit) and limits
// get (a key: value listing); --json prints the JSON instead.

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// limitOption reads one algorithm option of a limit's spec: its text, or
// false when the answer does not set it. limitOptions has one per flag of
// algorithmOptions (limitsview_test.go checks that).
var limitOptions = map[string]func(s client.LimitSpec) (string, bool){
	"max-reserved":      func(s client.LimitSpec) (string, bool) { return intText(s.MaxReserved) },
	"expiry":            func(s client.LimitSpec) (string, bool) { return durText(s.Expiry) },
	"max-burst-seconds": func(s client.LimitSpec) (string, bool) { return floatText(s.MaxBurstSeconds) },
	"warmup":            func(s client.LimitSpec) (string, bool) { return durText(s.Warmup) },
	"cold-factor":       func(s client.LimitSpec) (string, bool) { return floatText(s.ColdFactor) },
	"burst-ratio":       func(s client.LimitSpec) (string, bool) { return floatText(s.BurstRatio) },
	"strictness":        func(s client.LimitSpec) (string, bool) { return floatText(s.Strictness) },
	"max-in-flight":     func(s client.LimitSpec) (string, bool) { return intText(s.MaxInFlight) },
	"ttl":               func(s client.LimitSpec) (string, bool) { return durText(s.TTL) },
}

func intText(p *int64) (string, bool) {
	if p == nil {
		return "", false
	}
	return strconv.FormatInt(*p, 10), true
}

func floatText(p *float64) (string, bool) {
	if p == nil {
		return "", false
	}
	return strconv.FormatFloat(*p, 'g', -1, 64), true
}

func durText(p *time.Duration) (string, bool) {
	if p == nil {
		return "", false
	}
	return shortDuration(*p), true
}

// shortDuration is d as a Go duration string without zero trailing units
// ("1m" rather than "1m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// limitRate is a limit's rate as "R/PER" ("1/6s"), or "-" for a
// concurrency limit (it has none).
func limitRate(l client.Limit) string {
	if l.Algorithm == concurrencyAlgorithm {
		return "-"
	}
	per := l.Per
	if per == 0 {
		per = time.Second
	}
	return strconv.FormatFloat(l.Rate, 'g', -1, 64) + "/" + shortDuration(per)
}

// limitSetOptions are the options of the limit's algorithm that its
// answer sets, as flag names and values, in the order limits put lists
// them: the burst (max-reserved, max-burst-seconds, burst-ratio) or the
// in-flight cap (max-in-flight) among them.
func limitSetOptions(l client.Limit) [][2]string {
	var out [][2]string
	for _, name := range algorithmOptions[l.Algorithm] {
		if v, ok := limitOptions[name](l.LimitSpec); ok {
			out = append(out, [2]string{name, v})
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printLimitsTable prints one row per limit: its name, algorithm, rate,
// the options of its algorithm (as limits put takes them), whether it is
// leased and whether it is in shadow mode.
func printLimitsTable(w io.Writer, ls []client.Limit) {
	if len(ls) == 0 {
		fmt.Fprintln(w, "no limits (create one with permitd limits put)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tALGORITHM\tRATE\tOPTIONS\tLEASED\tSHADOW")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Algorithm, limitRate(l), optionsText(l), yesNo(l.Leased), yesNo(l.Shadow))
	}
	tw.Flush()
}

// optionsText is the options of l's algorithm that its answer sets, as
// "flag=value" words, or "-" if none.
func optionsText(l client.Limit) string {
	var opts []string
	for _, o := range limitSetOptions(l) {
		opts = append(opts, o[0]+"="+o[1])
	}
	if len(opts) == 0 {
		return "-"
	}
	return strings.Join(opts, " ")
}

// printLimit prints limit l as "key: value" lines, the keys its JSON's
// (--json) but for rate, as R/PER, and interval, a duration: its
// configuration, its lease pool if it is leased, and its counters (the
// shadow-mode ones when it is or was in shadow mode).
func printLimit(w io.Writer, l client.Limit) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	kv("name", l.Name)
	kv("algorithm", l.Algorithm)
	kv("rate", limitRate(l))
	for _, o := range limitSetOptions(l) {
		kv(strings.ReplaceAll(o[0], "-", "_"), o[1])
	}
	kv("shadow", yesNo(l.Shadow))
	kv("leased", yesNo(l.Leased))
	if p := l.LeasePool; p != nil {
		kv("burst_permits", p.BurstPermits)
		kv("max_outstanding_permits", p.MaxOutstandingPermits)
		kv("leases", p.Leases)
	}
	kv("version", l.Version)
	if l.Algorithm != concurrencyAlgorithm {
		kv("interval", shortDuration(time.Duration(l.IntervalNanos)))
	}
	kv("granted_requests", l.GrantedRequests)
	kv("granted_permits", l.GrantedPermits)
	kv("refused_requests", l.RefusedRequests)
	kv("expired_requests", l.ExpiredRequests)
	kv("expired_permits", l.ExpiredPermits)
	kv("refunded_permits", l.RefundedPermits)
	kv("charged_permits", l.ChargedPermits)
	kv("net_permits", l.NetPermits)
	if l.Shadow || l.ShadowGranted != 0 || l.ShadowWouldRefuse != 0 || l.ShadowWouldWait != 0 {
		kv("shadow_granted", l.ShadowGranted)
		kv("shadow_would_refuse", l.ShadowWouldRefuse)
		kv("shadow_would_wait", l.ShadowWouldWait)
	}
	tw.Flush()
}
