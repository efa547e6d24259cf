package runner

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// renderLeasedHTML is the report's section on the worker sidecars ("" for
// the other workloads).
func renderLeasedHTML(l *LeasedSummary) string {
	if l == nil {
		return ""
	}
	esc := html.EscapeString
	var b strings.Builder
	fmt.Fprintf(&b, "<h2>Worker sidecars</h2><p>Bound judged: <code>%s</code>. Lease TTL %v, margin %v (0: the worker's default). Fail-closed answers (503): %d",
		esc(l.Formula), time.Duration(l.TTLNanos), time.Duration(l.MarginNanos), l.FailClosed)
	if l.FailClosedExample != "" {
		fmt.Fprintf(&b, ", for example <small>%s</small>", esc(l.FailClosedExample))
	}
	b.WriteString(".</p>\n<table><tr><th>worker</th><th>group</th><th>http</th><th>gossip</th><th>restarts</th><th>grants received</th><th>leased</th><th>spent</th><th>stolen in</th><th>stolen out</th><th>credited</th><th>expired unused</th><th>outstanding</th><th>log</th></tr>\n")
	row := func(name, group, httpAddr, gossip, restarts, grants string, c [7]int64, log string) {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td></tr>\n",
			esc(name), esc(group), esc(httpAddr), esc(gossip), restarts, grants, c[0], c[1], c[2], c[3], c[4], c[5], c[6], log)
	}
	total := 0
	for _, w := range l.Workers {
		c := w.Last
		total += w.Grants
		row(w.Name, w.Group, w.HTTPAddr, w.GossipAddr, fmt.Sprint(w.Restarts), fmt.Sprint(w.Grants),
			[7]int64{c.Leased, c.Spent, c.StolenIn, c.StolenOut, c.Credited, c.ExpiredUnused, c.Outstanding},
			fmt.Sprintf("<a href=\"%s\">%s</a>", esc(w.Log), esc(w.Log)))
	}
	c := l.Fleet
	row("fleet", "", "", "", "", fmt.Sprint(total), [7]int64{c.Leased, c.Spent, c.StolenIn, c.StolenOut, c.Credited, c.ExpiredUnused, c.Outstanding}, "")
	b.WriteString("</table>\n<p><small>Counters are each process's last read, summed over restarts.</small></p>\n")
	return b.String()
}
