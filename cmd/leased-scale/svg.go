package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// A small hand-written SVG line chart: a grid of panels, each one metric
// against the number of workers (log x axis), one line per group count.

// series is one line of a panel; a NaN y is a gap (not measured).
type series struct {
	Label string
	X, Y  []float64
}

// panel is one chart of the grid.
type panel struct {
	Title  string
	LogY   bool
	Series []series
	// Goal, if not NaN, draws a dashed horizontal line at that y.
	Goal float64
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

const (
	panelW, panelH = 330, 230
	padL, padR     = 58, 12
	padT, padB     = 28, 34
)

// writeSVG draws the panels, cols per row, under a title.
func writeSVG(w io.Writer, title string, panels []panel, cols int) error {
	cols = max(cols, 1)
	rows := (len(panels) + cols - 1) / cols
	width, height := cols*panelW, rows*panelH+40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	// Legend: the series labels of the first panel that has any.
	for _, p := range panels {
		if len(p.Series) == 0 {
			continue
		}
		x := 10
		for i, s := range p.Series {
			c := palette[i%len(palette)]
			fmt.Fprintf(&b, `<line x1="%d" y1="31" x2="%d" y2="31" stroke="%s" stroke-width="2"/><text x="%d" y="35">%s</text>`+"\n", x, x+18, c, x+22, html.EscapeString(s.Label))
			x += 30 + 7*len(s.Label)
		}
		break
	}
	for i, p := range panels {
		ox, oy := (i%cols)*panelW, 40+(i/cols)*panelH
		drawPanel(&b, p, ox, oy)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// axisRange returns the panel's x and y ranges (log10 where asked).
func axisRange(p panel) (x0, x1, y0, y1 float64, ok bool) {
	x0, x1, y0, y1 = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for j := range s.X {
			if j >= len(s.Y) || s.X[j] <= 0 || math.IsNaN(s.Y[j]) || math.IsInf(s.Y[j], 0) || (p.LogY && s.Y[j] <= 0) {
				continue
			}
			x0, x1 = min(x0, math.Log10(s.X[j])), max(x1, math.Log10(s.X[j]))
			y := s.Y[j]
			if p.LogY {
				y = math.Log10(y)
			}
			y0, y1 = min(y0, y), max(y1, y)
		}
	}
	if !math.IsNaN(p.Goal) && p.Goal != 0 && !(p.LogY && p.Goal <= 0) {
		g := p.Goal
		if p.LogY {
			g = math.Log10(g)
		}
		y0, y1 = min(y0, g), max(y1, g)
	}
	if math.IsInf(x0, 1) {
		return 0, 1, 0, 1, false
	}
	if x1 == x0 {
		x0, x1 = x0-0.5, x1+0.5
	}
	if p.LogY {
		y0, y1 = math.Floor(y0), math.Ceil(y1)
	} else {
		y0 = min(y0, 0)
		y1 = niceCeil(y1)
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return x0, x1, y0, y1, true
}

// niceCeil rounds v > 0 up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// label formats an axis value compactly.
func label(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func drawPanel(b *strings.Builder, p panel, ox, oy int) {
	l, t := float64(ox+padL), float64(oy+padT)
	w, h := float64(panelW-padL-padR), float64(panelH-padT-padB)
	fmt.Fprintf(b, `<text x="%.0f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", l+w/2, oy+16, html.EscapeString(p.Title))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", l, t, w, h)
	x0, x1, y0, y1, ok := axisRange(p)
	if !ok {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#999">not measured</text>`+"\n", l+w/2, t+h/2)
		return
	}
	px := func(x float64) float64 { return l + (math.Log10(x)-x0)/(x1-x0)*w }
	py := func(y float64) float64 {
		if p.LogY {
			y = math.Log10(y)
		}
		return t + h - (y-y0)/(y1-y0)*h
	}
	// x ticks at powers of ten (and the data's x values).
	for e := math.Ceil(x0); e <= x1+1e-9; e++ {
		x := math.Pow(10, e)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n",
			px(x), t, px(x), t+h, px(x), t+h+13, label(x))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">workers</text>`+"\n", l+w/2, t+h+27)
	// y ticks: powers of ten (log) or five steps (linear).
	var ticks []float64
	if p.LogY {
		for e := y0; e <= y1+1e-9; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		for k := 0; k <= 4; k++ {
			ticks = append(ticks, y0+(y1-y0)*float64(k)/4)
		}
	}
	for _, y := range ticks {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			l, py(y), l+w, py(y), l-4, py(y)+4, label(y))
	}
	if !math.IsNaN(p.Goal) && !(p.LogY && p.Goal <= 0) {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#444" stroke-dasharray="4 3"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#444">goal</text>`+"\n",
			l, py(p.Goal), l+w, py(p.Goal), l+w-2, py(p.Goal)-3)
	}
	for i, s := range p.Series {
		c := palette[i%len(palette)]
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j := range s.X {
			if j >= len(s.Y) || s.X[j] <= 0 || math.IsNaN(s.Y[j]) || math.IsInf(s.Y[j], 0) || (p.LogY && s.Y[j] <= 0) {
				flush()
				continue
			}
			x, y := px(s.X[j]), py(s.Y[j])
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s workers, %s</title></circle>`+"\n",
				x, y, c, html.EscapeString(s.Label), label(s.X[j]), strconv.FormatFloat(s.Y[j], 'g', 4, 64))
		}
		flush()
	}
}
