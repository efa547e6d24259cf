package demo

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// verdict.go: how a scene states what it checked. Each scene ends with
// checks, a measured number against the bound its configuration gives
// (the formula named, the values plugged in), and one verdict line: PASS
// if every check held, else FAIL with the checks that did not.

// check is one thing a scene measured against its promise.
type check struct {
	// what is measured ("smallest gap between two permits used").
	what string
	// got is the measured value, as printed ("93 ms").
	got string
	// want is the bound, its formula and its values ("allowed: ≥
	// interval - expiry = 100 ms - 10 ms = 90 ms").
	want string
	// ok reports whether got is within want.
	ok bool
}

// String is the check's line: "[ok] what: got — want".
func (c check) String() string {
	mark := "[ok]  "
	if !c.ok {
		mark = "[FAIL]"
	}
	return c.line(mark)
}

// line is the check's line with mark.
func (c check) line(mark string) string {
	return fmt.Sprintf("  %s %s: %s — %s", mark, c.what, c.got, c.want)
}

// measured reports whether the check compares a measured value with a
// bound (not an expectation a scene stopped early may leave unmet).
func (c check) measured() bool {
	return strings.HasPrefix(c.want, "allowed:") && !strings.HasPrefix(c.got, "not measured")
}

// sceneResult is what a scene found: its checks, or the error that kept
// it from running to its checks.
type sceneResult struct {
	n      int
	title  string
	checks []check
	err    error
	// stopped reports that Ctrl-C ended the scene early: only a bound
	// broken by what it measured fails it then.
	stopped bool
}

// failed lists why the scene failed (nil if it passed, or was stopped
// early with no bound broken).
func (r sceneResult) failed() []string {
	var why []string
	if r.err != nil && !r.stopped {
		why = append(why, r.err.Error())
	}
	for _, c := range r.checks {
		if !c.ok && (!r.stopped || c.measured()) {
			why = append(why, fmt.Sprintf("%s was %s (%s)", c.what, c.got, c.want))
		}
	}
	if r.err == nil && len(r.checks) == 0 && !r.stopped {
		why = append(why, "nothing was checked")
	}
	return why
}

// verdict is the scene's verdict line: "scene 1 (title): PASS",
// "scene 1 (title): FAIL: why; why", or, stopped early by Ctrl-C with no
// bound broken, "scene 1 (title): STOPPED by Ctrl-C, not judged".
func (r sceneResult) verdict() string {
	if why := r.failed(); len(why) > 0 {
		return fmt.Sprintf("scene %d (%s): FAIL: %s", r.n, r.title, strings.Join(why, "; "))
	}
	if r.stopped {
		return fmt.Sprintf("scene %d (%s): STOPPED by Ctrl-C, not judged", r.n, r.title)
	}
	return fmt.Sprintf("scene %d (%s): PASS", r.n, r.title)
}

// print prints the scene's checks and its verdict line.
func (r sceneResult) print(out io.Writer) {
	if len(r.checks) > 0 {
		fmt.Fprintln(out, "checks:")
		for _, c := range r.checks {
			if r.stopped && !c.ok && !c.measured() {
				fmt.Fprintln(out, c.line("[not judged: stopped early]"))
			} else {
				fmt.Fprintln(out, c)
			}
		}
	}
	fmt.Fprintln(out, r.verdict())
}

// sceneHeader prints a scene's title line and its plain-words
// introduction (wrapped at 100 columns).
func sceneHeader(out io.Writer, n int, title string, d time.Duration, intro string) {
	fmt.Fprintf(out, "\n=== scene %d: %s (%s) ===\n%s\n", n, title, sec(d), wrap(intro, 100))
}

// note prints a sentence of information (not a check), wrapped.
func note(out io.Writer, format string, args ...any) {
	fmt.Fprintln(out, wrap(fmt.Sprintf(format, args...), 100))
}

// wrap breaks s into lines of at most width columns at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(s) {
		n := len([]rune(w))
		if col > 0 && col+1+n > width {
			b.WriteByte('\n')
			col = 0
		} else if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
	}
	return b.String()
}

// ms prints d in milliseconds, exactly ("93 ms", "97.1 ms",
// "3.333334 ms"): the bounds' formulas print their values so that the
// arithmetic can be followed.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) + " ms"
}

// ms3 prints d in milliseconds with at most three significant digits
// ("3.33 ms" for 3.333334 ms; "100 ms", "97.1 ms" as ms does).
func ms3(d time.Duration) string {
	v := float64(d) / 1e6
	if v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " ms"
}

// intervalNote gives, when the interval i is not exactly what ms3 prints
// (1/300 s is 3333334 ns, rounded up to the nanosecond), its exact value
// and what floor(w / i) comes to, so that the bound's arithmetic can be
// followed; "" when ms3 prints it exactly.
func intervalNote(w, i time.Duration) string {
	if ms3(i) == ms(i) {
		return ""
	}
	return fmt.Sprintf(" (exactly %d ns, so floor(W / I) = %d)", int64(i), int64(w/i))
}

// secs prints a measured d in seconds with one decimal ("1.3 s").
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

// sec prints a configured d in seconds, exactly ("10 s", "0.25 s").
func sec(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}
