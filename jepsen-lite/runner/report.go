package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
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
	span := max(w-tol-int64(maxAnswerRTT+maxLateUse), 0)
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
	esc := html.EscapeString
	color := "#2b9348"
	if sum.ExitCode != ExitValid {
		color = "#d00000"
	}
	fmt.Fprintf(&b, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>jepsen-lite: %s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.bad{color:#d00000;font-weight:bold}.ok{color:#2b9348;font-weight:bold}
.verdict{font-size:20px;padding:8px 12px;color:#fff;background:%s;display:inline-block;border-radius:4px}
code{background:#f5f5f5;padding:1px 4px}small{color:#666}
</style></head><body>
`, esc(sum.Verdict), color)
	fmt.Fprintf(&b, "<h1>jepsen-lite run</h1><p><span class=verdict>%s — exit %d</span></p>\n", esc(strings.ToUpper(sum.Verdict)), sum.ExitCode)
	fmt.Fprintf(&b, "<p><b>Mode:</b> %s — %s</p>\n", esc(sum.Mode), esc(sum.ModeDetail))
	if sum.Command != "" {
		fmt.Fprintf(&b, "<p><b>Command:</b> <code>%s</code></p>\n", esc(sum.Command))
	}
	c := sum.Config
	fmt.Fprintf(&b, "<p><b>Cluster:</b> %d nodes, %d workers in %d groups, workload <b>%s</b>, nemesis <code>%s</code>, seed <b>%d</b>, duration %v (final heal at %v), distinct loopback IPs: %v. <b>Limit:</b> <code>%s</code> %s. Wall time %.1fs.</p>\n",
		c.Nodes, c.Workers, c.Groups, esc(c.Workload), esc(sum.Nemesis), c.Seed, c.Duration, time.Duration(sum.HealNanos).Round(time.Millisecond), sum.DistinctIPs,
		esc(sum.Limit.Name), esc(mustJSON(sum.Limit.Config)), sum.WallSeconds)
	b.WriteString("<h2>Timeline</h2>\n")
	b.WriteString(renderSVG(sum, calls))

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
		fmt.Fprintf(&b, "<tr><td>%s</td><td class=%s>%s</td><td>%s</td><td><small>%s</small></td></tr>\n", esc(r.Name), cls, v, viol.String(), esc(detailString(r)))
	}
	b.WriteString("</table>\n")
	fmt.Fprintf(&b, "<p>Delivery jitter (tolerance): %v over %d calls (p50 %v, p99 %v). Timeline lag (real − cluster time): %v. API calls: %d. Workers: %s.</p>\n",
		time.Duration(sum.Jitter.JitterNanos), sum.Jitter.Samples, time.Duration(sum.Jitter.P50Nanos), time.Duration(sum.Jitter.P99Nanos),
		time.Duration(sum.TimelineLagNanos), sum.APICalls, esc(mustJSON(sum.Workers)))

	b.WriteString("<h2>Latency per phase</h2><table><tr><th>phase</th><th>from</th><th>to</th><th>reserves</th><th>ok / fail / info</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>API calls/s</th></tr>\n")
	for _, p := range sum.Phases {
		secs := float64(p.EndNanos-p.StartNanos) / 1e9
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.2fs</td><td>%.2fs</td><td>%d</td><td>%d / %d / %d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.2f</td></tr>\n",
			esc(p.Name), float64(p.StartNanos)/1e9, float64(p.EndNanos)/1e9, p.Reserves, p.OK, p.Fail, p.Info,
			ms(p.P50Nanos), ms(p.P90Nanos), ms(p.P99Nanos), ms(p.MaxNanos), float64(p.APICalls)/math.Max(secs, 1e-9))
	}
	b.WriteString("</table>\n")

	b.WriteString("<h2>Faults</h2><table><tr><th>#</th><th>fault</th><th>from</th><th>to</th><th>targets</th><th>notes</th><th>errors</th></tr>\n")
	for _, n := range sum.Nemeses {
		fmt.Fprintf(&b, "<tr><td>%d</td><td>%s%s</td><td>%.2fs</td><td>%.2fs</td><td>%s</td><td>%s</td><td class=bad>%s</td></tr>\n",
			n.Index, esc(n.Event.Name()), map[bool]string{true: " <small>(composed)</small>"}[n.Event.Ambient], float64(n.StartNanos)/1e9, float64(n.EndNanos)/1e9,
			esc(strings.Join(n.Targets, ", ")), esc(strings.Join(n.Notes, "; ")), esc(strings.Join(n.Errors, "; ")))
	}
	b.WriteString("</table>\n<h2>Leaders</h2><p>")
	for _, l := range sum.LeaderChanges {
		who := l.Leader
		if who == "" {
			who = "none"
		}
		fmt.Fprintf(&b, "%.2fs: %s (term %d) · ", float64(l.TimeNanos)/1e9, esc(who), l.Term)
	}
	b.WriteString("</p>\n<h2>Nodes</h2><table><tr><th>node</th><th>raft</th><th>http</th><th>restarts</th><th>snapshots installed</th><th>final state</th><th>log</th></tr>\n")
	for _, n := range sum.Nodes {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td><small>%s %s</small></td><td><a href=\"%s\">%s</a></td></tr>\n",
			esc(n.ID), esc(n.RaftAddr), esc(n.HTTPAddr), n.Restarts, n.RemoteSnapshots, esc(mustJSON(n.State)), esc(n.Error), esc(n.Log), esc(n.Log))
	}
	b.WriteString("</table>\n")
	b.WriteString(renderLeasedHTML(sum.Leased)) // leased workload: the worker sidecars
	if len(sum.Errors) > 0 {
		b.WriteString("<h2>Harness errors</h2><ul>")
		for _, e := range sum.Errors {
			fmt.Fprintf(&b, "<li class=bad>%s</li>", esc(e))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<h2>Files</h2><ul>")
	for _, f := range sum.Files {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>", esc(f), esc(f))
	}
	b.WriteString("</ul></body></html>\n")
	return b.String()
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

// renderSVG draws permits per second at the API against the limit, fault
// windows shaded, leader changes marked and violating calls in red.
func renderSVG(sum *Summary, calls []fakeapi.Call) string {
	const (
		width, height = 1100.0, 380.0
		left, right   = 60.0, 20.0
		top, bottom   = 62.0, 80.0
		labelRows     = 4
	)
	end := max(sum.EndNanos, 1)
	for _, c := range calls {
		end = max(end, c.TimeNanos)
	}
	bucket := max(int64(time.Second), end/200)
	counts := make([]int, end/bucket+1)
	for _, c := range calls {
		counts[c.TimeNanos/bucket]++
	}
	rate := sum.Limit.RatePerSecond
	ymax := math.Max(rate*1.6, 1)
	for _, n := range counts {
		ymax = math.Max(ymax, float64(n)/(float64(bucket)/1e9)*1.1)
	}
	plotW, plotH := width-left-right, height-top-bottom
	x := func(t int64) float64 { return left + plotW*float64(t)/float64(end) }
	y := func(v float64) float64 { return top + plotH*(1-v/ymax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11" font-family="sans-serif">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fafafa" stroke="#bbb"/>`+"\n", left, top, plotW, plotH)
	// Fault windows, labels in the first row where they do not overlap.
	var rowEnds []float64
	for _, n := range sum.Nemeses {
		stop := n.EndNanos
		if stop == 0 {
			stop = end
		}
		label := n.Event.Name() + " " + strings.Join(n.Targets, ",")
		row := 0
		for row < len(rowEnds) && rowEnds[row] > x(n.StartNanos) {
			row++
		}
		if row == labelRows { // all rows taken here: overlap where it ends soonest
			row = 0
			for i := range rowEnds {
				if rowEnds[i] < rowEnds[row] {
					row = i
				}
			}
		}
		if row == len(rowEnds) {
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = x(n.StartNanos) + 6.5*float64(len(label)) + 8
		col := faultColors[n.Event.Fault]
		if col == "" {
			col = "#999"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.25"><title>%s on %s, %.2fs–%.2fs</title></rect>`+"\n",
			x(n.StartNanos), top, math.Max(x(stop)-x(n.StartNanos), 1), plotH, col, html.EscapeString(n.Event.Name()), html.EscapeString(strings.Join(n.Targets, ",")), float64(n.StartNanos)/1e9, float64(stop)/1e9)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", x(n.StartNanos)+2, top-46+12*float64(row), col, html.EscapeString(label))
	}
	// The final heal.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2b9348" stroke-dasharray="6,3"/><text x="%.1f" y="%.1f" fill="#2b9348">final heal</text>`+"\n",
		x(sum.HealNanos), top, x(sum.HealNanos), top+plotH, x(sum.HealNanos)+3, top+plotH-4)
	// Axes and the limit.
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n", left-4, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">permits/s at the API</text>`+"\n", top+plotH/2, top+plotH/2)
	step := int64(5 * time.Second)
	if end > int64(2*time.Minute) {
		step = int64(30 * time.Second)
	}
	for t := int64(0); t <= end; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb"/><text x="%.1f" y="%.1f" text-anchor="middle">%ds</text>`+"\n",
			x(t), top+plotH, x(t), top+plotH+4, x(t), top+plotH+16, t/int64(time.Second))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4,4"/><text x="%.1f" y="%.1f">limit %.2f/s</text>`+"\n",
		left, y(rate), left+plotW, y(rate), left+plotW-80, y(rate)-4, rate)
	// Permits per second.
	var pts []string
	for i, n := range counts {
		t0, t1 := int64(i)*bucket, min(int64(i+1)*bucket, end)
		if t1-t0 < bucket/2 {
			continue // a partial last bucket would read as a drop
		}
		v := float64(n) / (float64(bucket) / 1e9)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(t0), y(v), x(t1), y(v)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1d3557" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
	// Leader changes.
	for _, l := range sum.LeaderChanges {
		who := l.Leader
		if who == "" {
			who = "none"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#457b9d" stroke-width="1"><title>leader %s term %d at %.2fs</title></line><text x="%.1f" y="%.1f" fill="#457b9d" transform="rotate(60 %.1f %.1f)">%s t%d</text>`+"\n",
			x(l.TimeNanos), top+plotH, x(l.TimeNanos), top+plotH+24, who, l.Term, float64(l.TimeNanos)/1e9, x(l.TimeNanos), top+plotH+28, x(l.TimeNanos), top+plotH+28, html.EscapeString(who), l.Term)
	}
	// Violations.
	for _, t := range violationTimes(sum, calls) {
		v := float64(counts[t/bucket]) / (float64(bucket) / 1e9)
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#d00000"><title>violating call at %.3fs</title></circle><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d00000" stroke-width="2"/>`+"\n",
			x(t), y(v), float64(t)/1e9, x(t), top+plotH-8, x(t), top+plotH)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">buckets of %v · shaded: fault windows · blue ticks: leader changes · red: calls that broke the bound</text>`+"\n",
		left, height-6, time.Duration(bucket))
	b.WriteString("</svg>\n")
	return b.String()
}
