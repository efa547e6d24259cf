package openapi_test

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/api"
)

// durationPattern builds the pattern of the document's Duration schema:
// Go's duration syntax (time.ParseDuration), "0" or numbers with a unit,
// with the whole part of each number bounded so that it alone fits in
// int64 nanoseconds, and a minus sign only on zero (the server reads
// "-0s" as 0 and rejects every negative duration).
func durationPattern() string {
	units := []struct {
		re string
		d  time.Duration
	}{
		{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
		{"ms", time.Millisecond}, {"(us|µs|μs)", time.Microsecond}, {"ns", time.Nanosecond},
	}
	var comps []string
	for _, u := range units {
		comps = append(comps, `(0*(0|`+upTo(math.MaxInt64/int64(u.d))+`)(\.[0-9]*)?|\.[0-9]+)`+u.re)
	}
	zero := `(0+(\.0*)?|\.0+)(ns|us|µs|μs|ms|s|m|h)`
	return `^([+]?(0|(` + strings.Join(comps, "|") + `)+)|-(0|(` + zero + `)+))$`
}

// upTo returns a regular expression for the decimal integers 1 to n
// (n > 9) without leading zeros.
func upTo(n int64) string {
	s := strconv.FormatInt(n, 10)
	var alts []string
	if len(s) > 2 {
		alts = append(alts, "[1-9][0-9]{0,"+strconv.Itoa(len(s)-2)+"}")
	} else {
		alts = append(alts, "[1-9]")
	}
	for i := range len(s) {
		d, lo := s[i]-'0', byte(0)
		if i == 0 {
			lo = 1
		}
		if d <= lo {
			continue
		}
		alt := s[:i] + string('0'+lo)
		if d-1 > lo {
			alt = s[:i] + "[" + string('0'+lo) + "-" + string('0'+d-1) + "]"
		}
		switch rest := len(s) - i - 1; {
		case rest == 1:
			alt += "[0-9]"
		case rest > 1:
			alt += "[0-9]{" + strconv.Itoa(rest) + "}"
		}
		alts = append(alts, alt)
	}
	return strings.Join(append(alts, s), "|")
}

// durationResidue lists the inputs on which the Duration pattern is known
// to disagree with the server, and why (the schema's description says
// so): true where the pattern accepts what the server rejects.
var durationResidue = map[string]bool{
	"2562047h1h":     true,  // two numbers overflow int64 ns together
	"2562047.9h":     true,  // a fraction lifts the largest whole part past it
	"9223372036.9s":  true,  // the same, in seconds
	"1m9223372036s":  true,  // a sum again
	"-0.1ns":         false, // negative, but 0 once rounded to whole nanoseconds
	"-0.0000000001s": false, // the same
	"-0.0009us":      false, // the same
	"153722867.5m":   true,  // the same, in minutes
	"+9223372036.9s": true,
	// the largest duration and a nanosecond more, as a sum
	"2562047h47m16.854775808s": true,
}

// TestDurationPattern: the document's Duration pattern is durationPattern,
// and it accepts exactly what the server's parser (api.ParseDuration,
// zero allowed) accepts, but for the residue the schema describes; the
// PositiveDuration pattern on top of it accepts exactly what the parser
// accepts as > 0, but for sub-nanosecond strings.
func TestDurationPattern(t *testing.T) {
	doc := loadDoc(t)
	dur := doc.Components.Schemas["Duration"].Value
	if want := durationPattern(); dur.Pattern != want {
		t.Fatalf("components/schemas/Duration pattern:\n%s\nwant durationPattern():\n%s", dur.Pattern, want)
	}
	pattern := regexp.MustCompile(dur.Pattern)
	positive := regexp.MustCompile(doc.Components.Schemas["PositiveDuration"].Value.Pattern)

	inputs := []string{
		"0", "+0", "-0", "00", "-00", "0s", "-0s", "+0s", "-0.000s", "-.0ms0s", "-0h0m0s", "-0.s", "-", "+", "", ".", ".s", "s",
		"1", "1s", "+1s", "-1s", "-1ns", "-0.5s", "1.5s", ".5s", "5.s", "1h30m", "1s1h", "1h1h", "00005s", "1µs", "1μs", "1us",
		"1S", "1d", "1 s", " 1s", "1s ", "--0", "+-1s", "1e3s", "0x10s", "1.2.3s", "1..2s", "0.1ns", "0.9ns", "1.9ns",
		"0.0000000001s", "9223372036854775807.9ns", "99999999999999999999ns", "9999999999h", "1h0m0s", "2562047h47m16.854775807s",
		"0.000000000000000000000000000001s", "1.00000000000000000000000000000s",
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond},
		{"µs", time.Microsecond}, {"μs", time.Microsecond}, {"ns", time.Nanosecond}} {
		top := math.MaxInt64 / int64(u.d)
		// The largest whole part of the unit and its neighbours (a
		// fraction on the largest may overflow: a residue).
		below, at, above := strconv.FormatInt(top-1, 10), strconv.FormatInt(top, 10), strconv.FormatUint(uint64(top)+1, 10)
		inputs = append(inputs, below+u.name, below+".5"+u.name, at+u.name, "000"+at+u.name, "-"+at+u.name,
			above+u.name, "0"+above+u.name, at+"0"+u.name)
		for p := int64(1); p > 0 && p <= top; p *= 10 {
			inputs = append(inputs, strconv.FormatInt(p, 10)+u.name)
			if p <= math.MaxInt64/10 {
				inputs = append(inputs, strconv.FormatInt(p*10-1, 10)+u.name)
			}
		}
	}
	for in := range durationResidue {
		inputs = append(inputs, in)
	}
	for _, in := range inputs {
		d, herr := api.ParseDuration("d", in, true)
		server, matches := herr == nil, pattern.MatchString(in)
		if want, residue := durationResidue[in]; residue {
			if matches != want || server == want {
				t.Errorf("%q: a known residue: the pattern accepts it: %v (want %v), the server: %v (want %v)", in, matches, want, server, !want)
			}
			continue
		}
		if matches != server {
			t.Errorf("%q: the pattern accepts it: %v, the server: %v (%v)", in, matches, server, herr)
		}
		// PositiveDuration: a Duration with a non-zero digit and no
		// minus sign; the server's > 0 fields reject 0.
		_, perr := api.ParseDuration("d", in, false)
		if pos := matches && positive.MatchString(in); pos != (perr == nil) && !(pos && server && d == 0) {
			t.Errorf("%q: PositiveDuration accepts it: %v, the server's > 0 fields: %v (%v)", in, pos, perr == nil, perr)
		}
	}
	t.Logf("%d inputs, %d known residues", len(inputs), len(durationResidue))
}
