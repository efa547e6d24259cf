package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
)

// finish sets the verdict and writes summary.json and index.html.
func (r *run) finish(sum *Summary) {
	switch {
	case len(sum.Checkers) > 0 && !sum.SafetyValid:
		sum.Verdict, sum.ExitCode = "unsafe", ExitSafety
	case len(sum.Errors) > 0 || len(sum.Checkers) == 0:
		sum.Verdict, sum.ExitCode = "incomplete", ExitHarness
	case !sum.LivenessValid:
		sum.Verdict, sum.ExitCode = "not recovered", ExitLiveness
	default:
		sum.Verdict, sum.ExitCode = "valid", ExitValid
	}
	if sum.ExitCode == ExitValid {
		// The raft data is only worth keeping to investigate a failure.
		if err := os.RemoveAll(filepath.Join(r.cfg.OutDir, "data")); err != nil {
			sum.Errors = append(sum.Errors, err.Error())
		}
	}
	sum.Files = reportFiles(r.cfg.OutDir)
	sum.Files = append(sum.Files, "summary.json", "index.html")
	slices.Sort(sum.Files)
	sum.Files = slices.Compact(sum.Files)
	if b, err := json.MarshalIndent(sum, "", "  "); err == nil {
		if err := os.WriteFile(filepath.Join(r.cfg.OutDir, "summary.json"), append(b, '\n'), 0o644); err != nil {
			r.logf("ERROR: writing summary.json: %v", err)
		}
	} else {
		r.logf("ERROR: encoding summary.json: %v", err)
	}
	if err := os.WriteFile(filepath.Join(r.cfg.OutDir, "index.html"), []byte(renderHTML(sum)), 0o644); err != nil {
		r.logf("ERROR: writing index.html: %v", err)
	}
	r.logf("verdict: %s (exit %d); report: %s", sum.Verdict, sum.ExitCode, filepath.Join(r.cfg.OutDir, "index.html"))
	for _, c := range sum.Checkers {
		r.logf("  %s", c.String())
	}
	for _, e := range sum.Errors {
		r.logf("  error: %s", e)
	}
}

// reportFiles lists the report's files, relative to dir (data excluded).
func reportFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			if rel == "data" {
				return filepath.SkipDir
			}
			return nil
		}
		out = append(out, rel)
		return nil
	})
	return out
}

// writeCalls writes the fake API's calls as JSON lines.
func writeCalls(path string, calls []fakeapi.Call) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, c := range calls {
		if err := enc.Encode(c); err != nil {
			f.Close()
			return fmt.Errorf("runner: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("runner: %w", err)
	}
	return f.Close()
}

// rawJSON keeps b as JSON in the summary if it is valid JSON, else as a
// string.
func rawJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

// violationTimes recomputes, for the timeline, the API calls that broke
// the stated bound (the checkers' verdict is authoritative; this only
// places red marks).
func violationTimes(sum *Summary, calls []fakeapi.Call) []int64 {
	tol := sum.Jitter.JitterNanos
	var out []int64
	li := sum.Limit
	sorted := slices.Clone(calls)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].TimeNanos < sorted[j].TimeNanos })
	if sum.Config.Workload == WorkloadStrict {
		need := li.IntervalNanos - li.ExpiryNanos - tol
		for i := 1; i < len(sorted); i++ {
			if sorted[i].TimeNanos-sorted[i-1].TimeNanos < need {
				out = append(out, sorted[i].TimeNanos)
			}
		}
		return out
	}
	b, err := li.bound(sum.Config.Workload)
	if err != nil || li.IntervalNanos <= 0 {
		return nil
	}
	w := li.IntervalNanos
	span := max(w-tol-int64(workload.MaxAnswerRTT+workload.MaxLateUse), 0)
	limit := b.Max(w)
	first := 0
	for last := range sorted {
		for sorted[last].TimeNanos-sorted[first].TimeNanos > span {
			first++
		}
		if int64(last-first+1) > limit {
			out = append(out, sorted[last].TimeNanos)
		}
	}
	return out
}

// readCalls reads api-calls.jsonl back for the report.
func readCalls(dir string) []fakeapi.Call {
	f, err := os.Open(filepath.Join(dir, "api-calls.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []fakeapi.Call
	dec := json.NewDecoder(f)
	for range 10_000_000 {
		var c fakeapi.Call
		if dec.Decode(&c) != nil {
			break
		}
		out = append(out, c)
	}
	return out
}

var faultColors = map[string]string{
	FaultPartition: "#f4a261", FaultKill: "#e76f51", FaultPause: "#9b5de5",
	FaultClock: "#2a9d8f", FaultLoss: "#e9c46a", FaultSnapshot: "#457b9d",
}

// renderHTML renders the self-contained report page.
func renderHTML(sum *Summary) string {
	calls := readCalls(sum.Config.OutDir)
	var b strings.Builder
	writeHTMLHead(&b, sum)
	writeHTMLRun(&b, sum)
	b.WriteString("<h2>Timeline</h2>\n")
	b.WriteString(renderSVG(sum, calls))
	writeHTMLCheckers(&b, sum)
	writeHTMLPhases(&b, sum)
	writeHTMLFaults(&b, sum)
	writeHTMLNodes(&b, sum)
	return b.String()
}

// writeHTMLHead writes the page's head, its style coloured by the verdict.
func writeHTMLHead(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	color := "#2b9348"
	if sum.ExitCode != ExitValid {
		color = "#d00000"
	}
	fmt.Fprintf(b, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>jepsen-lite: %s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.bad{color:#d00000;font-weight:bold}.ok{color:#2b9348;font-weight:bold}
.verdict{font-size:20px;padding:8px 12px;color:#fff;background:%s;display:inline-block;border-radius:4px}
code{background:#f5f5f5;padding:1px 4px}small{color:#666}
</style></head><body>
`, esc(sum.Verdict), color)
}

// writeHTMLRun writes the verdict and what ran: mode, command, cluster,
// limit and a secure run's credentials.
func writeHTMLRun(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	fmt.Fprintf(b, "<h1>jepsen-lite run</h1><p><span class=verdict>%s — exit %d</span></p>\n", esc(strings.ToUpper(sum.Verdict)), sum.ExitCode)
	fmt.Fprintf(b, "<p><b>Mode:</b> %s — %s</p>\n", esc(sum.Mode), esc(sum.ModeDetail))
	if sum.Command != "" {
		fmt.Fprintf(b, "<p><b>Command:</b> <code>%s</code></p>\n", esc(sum.Command))
	}
	c := sum.Config
	fmt.Fprintf(b, "<p><b>Cluster:</b> %d nodes, %d workers in %d groups, workload <b>%s</b>, nemesis <code>%s</code>, seed <b>%d</b>, duration %v (final heal at %v), distinct loopback IPs: %v. <b>Limit:</b> <code>%s</code> %s. Wall time %.1fs.</p>\n",
		c.Nodes, c.Workers, c.Groups, esc(c.Workload), esc(sum.Nemesis), c.Seed, c.Duration, time.Duration(sum.HealNanos).Round(time.Millisecond), sum.DistinctIPs,
		esc(sum.Limit.Name), esc(mustJSON(sum.Limit.Config)), sum.WallSeconds)
	if sec := sum.Security; sec != nil {
		var toks []string
		for _, t := range sec.Tokens {
			toks = append(toks, t.Name+" ("+t.Role+")")
		}
		var ls []string
		for _, id := range slices.Sorted(maps.Keys(sec.AgentListeners)) {
			ls = append(ls, fmt.Sprintf("%s %d", id, sec.AgentListeners[id]))
		}
		fmt.Fprintf(b, "<p><b>Secure:</b> API over TLS 1.3 and raft over mutual TLS (CA and node certificates in <code>%s</code>, valid for %s), API tokens %s; agent starts that listened with tls=true tokens=true: %s.</p>\n",
			esc(sec.Dir), esc(strings.Join(sec.CertHosts, ", ")), esc(strings.Join(toks, ", ")), esc(strings.Join(ls, ", ")))
	}
}

// writeHTMLCheckers writes the checkers' verdicts, the jitter and the
// workers' reserves.
func writeHTMLCheckers(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	b.WriteString("<h2>Checkers</h2><table><tr><th>checker</th><th>verdict</th><th>violations</th><th>details</th></tr>\n")
	for _, r := range sum.Checkers {
		cls, v := "ok", "valid"
		if !r.Valid {
			cls, v = "bad", "INVALID"
		}
		var viol strings.Builder
		for i, s := range r.Violations {
			if i == 5 {
				fmt.Fprintf(&viol, "… (%d in all)", r.ViolationsTotal())
				break
			}
			fmt.Fprintf(&viol, "<div class=bad>%s</div>", esc(s))
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td class=%s>%s</td><td>%s</td><td><small>%s</small></td></tr>\n", esc(r.Name), cls, v, viol.String(), esc(detailString(r)))
	}
	b.WriteString("</table>\n")
	fmt.Fprintf(b, "<p>Delivery jitter (tolerance): %v over %d calls (p50 %v, p99 %v). Timeline lag (real − cluster time): %v. API calls: %d. Workers: %s.</p>\n",
		time.Duration(sum.Jitter.JitterNanos), sum.Jitter.Samples, time.Duration(sum.Jitter.P50Nanos), time.Duration(sum.Jitter.P99Nanos),
		time.Duration(sum.TimelineLagNanos), sum.APICalls, esc(mustJSON(sum.Workers)))
	w := sum.Workers
	fmt.Fprintf(b, "<p><b>Reserves:</b> %d granted for %d permits, <b>%d of several permits</b> (%d multi-permit turns); %d refused; %d failed (%d never delivered); %d unknown.</p>\n",
		w.Granted, w.PermitsGranted, w.MultiPermitGrants, w.MultiPermitTurns, w.Refused, w.Failed, w.NotDelivered, w.Unknown)
}

// writeHTMLPhases writes the latency per phase.
func writeHTMLPhases(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	b.WriteString("<h2>Latency per phase</h2><table><tr><th>phase</th><th>from</th><th>to</th><th>reserves</th><th>ok / fail / info</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>API calls/s</th></tr>\n")
	for _, p := range sum.Phases {
		secs := float64(p.EndNanos-p.StartNanos) / 1e9
		fmt.Fprintf(b, "<tr><td>%s</td><td>%.2fs</td><td>%.2fs</td><td>%d</td><td>%d / %d / %d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.2f</td></tr>\n",
			esc(p.Name), float64(p.StartNanos)/1e9, float64(p.EndNanos)/1e9, p.Reserves, p.OK, p.Fail, p.Info,
			ms(p.P50Nanos), ms(p.P90Nanos), ms(p.P99Nanos), ms(p.MaxNanos), float64(p.APICalls)/math.Max(secs, 1e-9))
	}
	b.WriteString("</table>\n")
}

// writeHTMLFaults writes the faults and the leaders.
func writeHTMLFaults(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	b.WriteString("<h2>Faults</h2><table><tr><th>#</th><th>fault</th><th>from</th><th>to</th><th>targets</th><th>notes</th><th>errors</th></tr>\n")
	for _, n := range sum.Nemeses {
		fmt.Fprintf(b, "<tr><td>%d</td><td>%s%s</td><td>%.2fs</td><td>%.2fs</td><td>%s</td><td>%s</td><td class=bad>%s</td></tr>\n",
			n.Index, esc(n.Event.Name()), map[bool]string{true: " <small>(composed)</small>"}[n.Event.Ambient], float64(n.StartNanos)/1e9, float64(n.EndNanos)/1e9,
			esc(strings.Join(n.Targets, ", ")), esc(strings.Join(n.Notes, "; ")), esc(strings.Join(n.Errors, "; ")))
	}
	b.WriteString("</table>\n<h2>Leaders</h2><p>")
	for _, l := range sum.LeaderChanges {
		who := l.Leader
		if who == "" {
			who = "none"
		}
		fmt.Fprintf(b, "%.2fs: %s (term %d) · ", float64(l.TimeNanos)/1e9, esc(who), l.Term)
	}
}

// writeHTMLNodes writes the nodes, the worker sidecars (leased workload),
// the harness errors and the files, and ends the page.
func writeHTMLNodes(b *strings.Builder, sum *Summary) {
	esc := html.EscapeString
	b.WriteString("</p>\n<h2>Nodes</h2><table><tr><th>node</th><th>raft</th><th>http</th><th>restarts</th><th>snapshots installed from a leader (seen)</th><th>final state</th><th>log</th></tr>\n")
	for _, n := range sum.Nodes {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td><small>%s %s</small></td><td><a href=\"%s\">%s</a></td></tr>\n",
			esc(n.ID), esc(n.RaftAddr), esc(n.HTTPAddr), n.Restarts, n.RemoteSnapshots, esc(mustJSON(n.State)), esc(n.Error), esc(n.Log), esc(n.Log))
	}
	b.WriteString("</table>\n")
	b.WriteString(renderLeasedHTML(sum.Leased)) // leased workload: the worker sidecars
	if len(sum.Errors) > 0 {
		b.WriteString("<h2>Harness errors</h2><ul>")
		for _, e := range sum.Errors {
			fmt.Fprintf(b, "<li class=bad>%s</li>", esc(e))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<h2>Files</h2><ul>")
	for _, f := range sum.Files {
		fmt.Fprintf(b, "<li><a href=\"%s\">%s</a></li>", esc(f), esc(f))
	}
	b.WriteString("</ul></body></html>\n")
}

func ms(ns int64) string {
	if ns == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1fms", float64(ns)/1e6)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// detailString renders a result's details compactly (no long lists).
func detailString(r checker.Result) string {
	keys := make([]string, 0, len(r.Details))
	for k := range r.Details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		s := mustJSON(r.Details[k])
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}
