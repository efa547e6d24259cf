package runner

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

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
