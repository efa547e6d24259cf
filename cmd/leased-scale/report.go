package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// metric is one measured quantity of a result, for the chart, the
// growth exponents and the table.
type metric struct {
	key, title string
	logY       bool
	goal       float64
	get        func(result) float64
}

// secs turns a convergence time into a plotted value (NaN: not converged).
func secs(v float64) float64 {
	if v < 0 {
		return math.NaN()
	}
	return v
}

var metrics = []metric{
	{"raft_entries_per_sec", "register log entries / s", true, math.NaN(), func(r result) float64 { return r.EntriesPerSec }},
	{"fairness_error_pct", "fairness error, % (register view)", false, 2, func(r result) float64 { return 100 * r.FairnessErr }},
	{"leader_renewal_cores", "leader CPU above idle, cores", true, 0.1, func(r result) float64 { return r.LeaderRenewalCores }},
	{"leader_cpu_us_per_command", "leader CPU per renewal, µs", true, math.NaN(), func(r result) float64 { return r.LeaderUsPerCommand }},
	{"gossip_bytes_per_worker_per_sec", "memberlist bytes sent / worker / s", true, math.NaN(), func(r result) float64 { return r.GossipBytesPerWS }},
	{"converge_join_seconds", "converge after join, s", false, math.NaN(), func(r result) float64 { return secs(r.JoinS) }},
	{"converge_leave_seconds", "converge after leave, s", false, math.NaN(), func(r result) float64 { return secs(r.LeaveS) }},
	{"converge_cut_seconds", "converge after partition (cut), s", false, math.NaN(), func(r result) float64 { return secs(r.CutS) }},
	{"converge_heal_seconds", "converge after heal, s", false, math.NaN(), func(r result) float64 { return secs(r.HealS) }},
}

// ok reports whether a result was measured to the end.
func ok(r result) bool { return r.Error == "" }

// groupCounts returns the group counts of the results, ascending.
func groupCounts(rs []result) []int {
	var gs []int
	for _, r := range rs {
		if !slices.Contains(gs, r.Groups) {
			gs = append(gs, r.Groups)
		}
	}
	slices.Sort(gs)
	return gs
}

// growth returns, per metric and group count ("metric/g10"), the
// exponent k of the fit metric ~ workers^k over the measured sizes.
func growth(rs []result) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metrics {
		for _, g := range groupCounts(rs) {
			var xs, ys []float64
			for _, r := range rs {
				if r.Groups == g && ok(r) {
					xs, ys = append(xs, float64(r.Workers)), append(ys, m.get(r))
				}
			}
			if k := growthExponent(xs, ys); !math.IsNaN(k) {
				out[fmt.Sprintf("%s/g%d", m.key, g)] = math.Round(k*100) / 100
			}
		}
	}
	return out
}

// chartPanels turns the results into one panel per metric, one series per
// group count.
func chartPanels(rep report) []panel {
	var ps []panel
	for _, m := range metrics {
		p := panel{Title: m.title, LogY: m.logY, Goal: m.goal}
		for _, g := range groupCounts(rep.Results) {
			s := series{Label: fmt.Sprintf("%d group%s", g, map[bool]string{true: "", false: "s"}[g == 1])}
			for _, r := range rep.Results {
				if r.Groups == g && ok(r) {
					s.X, s.Y = append(s.X, float64(r.Workers)), append(s.Y, m.get(r))
				}
			}
			p.Series = append(p.Series, s)
		}
		ps = append(ps, p)
	}
	return ps
}

// conv formats a convergence time.
func conv(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

// writeTable prints the results as a Markdown table.
func writeTable(w io.Writer, rep report) {
	fmt.Fprintln(w, "| workers | groups | log entries/s | renewals/s | leader cores: total / idle / renewals | leader µs/renewal | gossip B/worker/s | fairness error | join s | leave s | cut s | heal s |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rep.Results {
		if !ok(r) {
			fmt.Fprintf(w, "| %d | %d | failed: %s |||||||||\n", r.Workers, r.Groups, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		fmt.Fprintf(w, "| %d | %d | %.0f | %.0f | %.3f / %.3f / %.3f | %.0f | %.0f | %.2f %% | %s | %s | %s | %s |\n",
			r.Workers, r.Groups, r.EntriesPerSec, r.RenewalsPerSec, r.LeaderCores, r.LeaderIdleCores, r.LeaderRenewalCores, r.LeaderUsPerCommand,
			r.GossipBytesPerWS, 100*r.FairnessErr, conv(r.JoinS), conv(r.LeaveS), conv(r.CutS), conv(r.HealS))
	}
	if len(rep.Growth) > 0 {
		keys := make([]string, 0, len(rep.Growth))
		for k := range rep.Growth {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintln(w, "\ngrowth exponents (metric ~ workers^k):")
		for _, k := range keys {
			fmt.Fprintf(w, "  %s %.2f\n", k, rep.Growth[k])
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
