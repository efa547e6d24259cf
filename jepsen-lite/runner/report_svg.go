package runner

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
)

// The timeline's geometry.
const (
	svgWidth, svgHeight = 1100.0, 380.0
	svgLeft, svgRight   = 60.0, 20.0
	svgTop, svgBottom   = 62.0, 80.0
	svgLabelRows        = 4
)

// renderSVG draws permits per second at the API against the limit, fault
// windows shaded, leader changes marked and violating calls in red.
func renderSVG(sum *Summary, calls []fakeapi.Call) string {
	p := newTimelinePlot(sum, calls)
	b := &p.b
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11" font-family="sans-serif">`+"\n", svgWidth, svgHeight)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fafafa" stroke="#bbb"/>`+"\n", svgLeft, svgTop, p.plotW, p.plotH)
	p.drawFaults(sum.Nemeses)
	// The final heal.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2b9348" stroke-dasharray="6,3"/><text x="%.1f" y="%.1f" fill="#2b9348">final heal</text>`+"\n",
		p.x(sum.HealNanos), svgTop, p.x(sum.HealNanos), svgTop+p.plotH, p.x(sum.HealNanos)+3, svgTop+p.plotH-4)
	p.drawAxes()
	p.drawRate()
	p.drawLeaders(sum.LeaderChanges)
	p.drawViolations(violationTimes(sum, calls))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555">buckets of %v · shaded: fault windows · blue ticks: leader changes · red: calls that broke the bound</text>`+"\n",
		svgLeft, svgHeight-6, time.Duration(p.bucket))
	b.WriteString("</svg>\n")
	return b.String()
}

// timelinePlot is the timeline being drawn: its scales, the calls counted
// per bucket, and the SVG so far.
type timelinePlot struct {
	b            strings.Builder
	end, bucket  int64
	counts       []int
	rate, ymax   float64
	plotW, plotH float64
}

// newTimelinePlot counts the calls per bucket and scales the plot.
func newTimelinePlot(sum *Summary, calls []fakeapi.Call) *timelinePlot {
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
	return &timelinePlot{end: end, bucket: bucket, counts: counts, rate: rate, ymax: ymax,
		plotW: svgWidth - svgLeft - svgRight, plotH: svgHeight - svgTop - svgBottom}
}

// x is time t's abscissa.
func (p *timelinePlot) x(t int64) float64 { return svgLeft + p.plotW*float64(t)/float64(p.end) }

// y is rate v's ordinate.
func (p *timelinePlot) y(v float64) float64 { return svgTop + p.plotH*(1-v/p.ymax) }

// drawFaults shades the fault windows, labels in the first row where they
// do not overlap.
func (p *timelinePlot) drawFaults(nemeses []NemesisRecord) {
	var rowEnds []float64
	for _, n := range nemeses {
		stop := n.EndNanos
		if stop == 0 {
			stop = p.end
		}
		label := n.Event.Name() + " " + strings.Join(n.Targets, ",")
		row := 0
		for row < len(rowEnds) && rowEnds[row] > p.x(n.StartNanos) {
			row++
		}
		if row == svgLabelRows { // all rows taken here: overlap where it ends soonest
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
		rowEnds[row] = p.x(n.StartNanos) + 6.5*float64(len(label)) + 8
		col := faultColors[n.Event.Fault]
		if col == "" {
			col = "#999"
		}
		fmt.Fprintf(&p.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.25"><title>%s on %s, %.2fs–%.2fs</title></rect>`+"\n",
			p.x(n.StartNanos), svgTop, math.Max(p.x(stop)-p.x(n.StartNanos), 1), p.plotH, col, html.EscapeString(n.Event.Name()), html.EscapeString(strings.Join(n.Targets, ",")), float64(n.StartNanos)/1e9, float64(stop)/1e9)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", p.x(n.StartNanos)+2, svgTop-46+12*float64(row), col, html.EscapeString(label))
	}
}

// drawAxes draws the axes and the limit.
func (p *timelinePlot) drawAxes() {
	b, top, plotH := &p.b, float64(svgTop), p.plotH
	for i := 0; i <= 4; i++ {
		v := p.ymax * float64(i) / 4
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n", svgLeft-4, p.y(v)+4, v)
	}
	fmt.Fprintf(b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">permits/s at the API</text>`+"\n", top+plotH/2, top+plotH/2)
	step := int64(5 * time.Second)
	if p.end > int64(2*time.Minute) {
		step = int64(30 * time.Second)
	}
	for t := int64(0); t <= p.end; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb"/><text x="%.1f" y="%.1f" text-anchor="middle">%ds</text>`+"\n",
			p.x(t), top+plotH, p.x(t), top+plotH+4, p.x(t), top+plotH+16, t/int64(time.Second))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="4,4"/><text x="%.1f" y="%.1f">limit %.2f/s</text>`+"\n",
		svgLeft, p.y(p.rate), svgLeft+p.plotW, p.y(p.rate), svgLeft+p.plotW-80, p.y(p.rate)-4, p.rate)
}

// drawRate draws the permits per second.
func (p *timelinePlot) drawRate() {
	var pts []string
	for i, n := range p.counts {
		t0, t1 := int64(i)*p.bucket, min(int64(i+1)*p.bucket, p.end)
		if t1-t0 < p.bucket/2 {
			continue // a partial last bucket would read as a drop
		}
		v := float64(n) / (float64(p.bucket) / 1e9)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", p.x(t0), p.y(v), p.x(t1), p.y(v)))
	}
	fmt.Fprintf(&p.b, `<polyline fill="none" stroke="#1d3557" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
}

// drawLeaders marks the leader changes.
func (p *timelinePlot) drawLeaders(changes []LeaderChange) {
	top, plotH := float64(svgTop), p.plotH
	for _, l := range changes {
		who := l.Leader
		if who == "" {
			who = "none"
		}
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#457b9d" stroke-width="1"><title>leader %s term %d at %.2fs</title></line><text x="%.1f" y="%.1f" fill="#457b9d" transform="rotate(60 %.1f %.1f)">%s t%d</text>`+"\n",
			p.x(l.TimeNanos), top+plotH, p.x(l.TimeNanos), top+plotH+24, who, l.Term, float64(l.TimeNanos)/1e9, p.x(l.TimeNanos), top+plotH+28, p.x(l.TimeNanos), top+plotH+28, html.EscapeString(who), l.Term)
	}
}

// drawViolations marks the violating calls at times ts in red.
func (p *timelinePlot) drawViolations(ts []int64) {
	top, plotH := float64(svgTop), p.plotH
	for _, t := range ts {
		v := float64(p.counts[t/p.bucket]) / (float64(p.bucket) / 1e9)
		fmt.Fprintf(&p.b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#d00000"><title>violating call at %.3fs</title></circle><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d00000" stroke-width="2"/>`+"\n",
			p.x(t), p.y(v), float64(t)/1e9, p.x(t), top+plotH-8, p.x(t), top+plotH)
	}
}
