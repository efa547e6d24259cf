package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// valueKind is what a flag holds; config files (config.go) check JSON
// types against it.
type valueKind int

const (
	kindString valueKind = iota
	kindList             // a comma-separated list; a JSON array of strings in a config file
	kindBool
	kindInt
	kindFloat
	kindDuration
)

// value is a flag.Value that parses and validates its text with a precise
// error (without the flag's name: callers add "--name", the config key or
// the environment variable).
type value struct {
	name string
	kind valueKind
	// typ is shown after the flag name in --help ("duration", "N", ...).
	typ string
	set func(string) error
	get func() string
	// c receives the error of a failed Set during parse.
	c *cmdLine
}

// Set implements flag.Value.
func (v *value) Set(s string) error {
	var err error
	if v.c != nil && v.c.parsing && v.kind != kindBool && v.c.looksLikeFlag(s) {
		// The flag package takes the next word as the value even when it
		// is another flag: "--algorithm --rate 1" would set --algorithm
		// to "--rate".
		err = fmt.Errorf("needs a value (got the flag %s)", s)
	} else {
		err = v.set(s)
	}
	if err != nil && v.c != nil {
		v.c.failed = &flagError{name: v.name, value: s, err: err}
	}
	return err
}

// String implements flag.Value.
func (v *value) String() string {
	if v == nil || v.get == nil {
		return ""
	}
	return v.get()
}

// boolValue is a value that the flag package treats as a boolean flag
// (--json, --wait=false).
type boolValue struct{ *value }

// IsBoolFlag implements the flag package's boolFlag.
func (boolValue) IsBoolFlag() bool { return true }

// define registers v as flag name with usage.
func (c *cmdLine) define(v *value, name, usage string) {
	v.name, v.c = name, c
	c.values[name] = v
	var fv flag.Value = v
	if v.kind == kindBool {
		fv = boolValue{v}
	}
	c.fs.Var(fv, name, usage)
	c.order = append(c.order, name)
}

// String defines a string flag; check (optional) validates the value.
func (c *cmdLine) String(p *string, name, typ, def, usage string, check func(string) error) {
	*p = def
	c.define(&value{kind: kindString, typ: typ, get: func() string { return *p }, set: func(s string) error {
		if check != nil && s != "" { // "": not set (the default)
			if err := check(s); err != nil {
				return err
			}
		}
		*p = s
		return nil
	}}, name, usage)
}

// List defines a comma-separated list flag (kept as its text; see
// splitList); check (optional) validates each item.
func (c *cmdLine) List(p *string, name, typ, def, usage string, check func(item string) error) {
	*p = def
	c.define(&value{kind: kindList, typ: typ, get: func() string { return *p }, set: func(s string) error {
		if check != nil {
			for _, item := range splitList(s) {
				if err := check(item); err != nil {
					return err
				}
			}
		}
		*p = s
		return nil
	}}, name, usage)
}

// Choice defines a string flag that must be one of allowed.
func (c *cmdLine) Choice(p *string, name, def, usage string, allowed ...string) {
	*p = def
	c.define(&value{kind: kindString, typ: strings.Join(allowed, "|"), get: func() string { return *p }, set: func(s string) error {
		for _, a := range allowed {
			if s == a {
				*p = s
				return nil
			}
		}
		return fmt.Errorf("%q is not allowed; allowed: %s", s, orList(allowed))
	}}, name, usage)
}

// Bool defines a boolean flag.
func (c *cmdLine) Bool(p *bool, name string, def bool, usage string) {
	*p = def
	c.define(&value{kind: kindBool, get: func() string { return strconv.FormatBool(*p) }, set: func(s string) error {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean; allowed: true or false", s)
		}
		*p = b
		return nil
	}}, name, usage)
}

// Int64 defines an integer flag in [lo, hi]; allowed describes the range
// in messages (e.g. "an integer >= 1").
func (c *cmdLine) Int64(p *int64, name, typ string, def, lo, hi int64, allowed, usage string) {
	*p = def
	c.defineInt(name, typ, lo, hi, allowed, usage, func(n int64) { *p = n }, func() string { return strconv.FormatInt(*p, 10) })
}

// Int is Int64 for an int.
func (c *cmdLine) Int(p *int, name, typ string, def, lo, hi int, allowed, usage string) {
	*p = def
	c.defineInt(name, typ, int64(lo), int64(hi), allowed, usage, func(n int64) { *p = int(n) }, func() string { return strconv.Itoa(*p) })
}

// defineInt defines an integer flag in [lo, hi] stored by store.
func (c *cmdLine) defineInt(name, typ string, lo, hi int64, allowed, usage string, store func(int64), get func() string) {
	c.define(&value{kind: kindInt, typ: typ, get: get, set: func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if isRangeError(err) {
				return fmt.Errorf("%q is out of range; allowed: %s", s, allowed)
			}
			return fmt.Errorf("%q is not an integer; allowed: %s", s, allowed)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is out of range; allowed: %s", n, allowed)
		}
		store(n)
		return nil
	}}, name, usage)
}

// Uint64 defines an unsigned integer flag in [lo, hi].
func (c *cmdLine) Uint64(p *uint64, name, typ string, def, lo, hi uint64, allowed, usage string) {
	*p = def
	c.define(&value{kind: kindInt, typ: typ, get: func() string { return strconv.FormatUint(*p, 10) }, set: func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer; allowed: %s", s, allowed)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is out of range; allowed: %s", n, allowed)
		}
		*p = n
		return nil
	}}, name, usage)
}

// Float defines a finite number flag; ok says whether a value is in range
// and allowed describes the range (e.g. "a number > 0").
func (c *cmdLine) Float(p *float64, name, typ string, def float64, ok func(float64) bool, allowed, usage string) {
	*p = def
	c.define(&value{kind: kindFloat, typ: typ, get: func() string { return strconv.FormatFloat(*p, 'g', -1, 64) }, set: func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRangeError(err) {
			return fmt.Errorf("%q is not a number; allowed: %s", s, allowed)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a finite number; allowed: %s", s, allowed)
		}
		if ok != nil && !ok(f) {
			return fmt.Errorf("%s is out of range; allowed: %s", s, allowed)
		}
		*p = f
		return nil
	}}, name, usage)
}

// isRangeError reports whether err is strconv's range error (a float too
// large parses as ±Inf, then reported as not finite).
func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// durationRule is which durations a flag accepts.
type durationRule int

const (
	durPositive    durationRule = iota // > 0
	durNonNegative                     // >= 0
	durAny                             // any sign
)

// Duration defines a duration flag (a Go duration string) following rule.
func (c *cmdLine) Duration(p *time.Duration, name string, def time.Duration, rule durationRule, usage string) {
	c.DurationRange(p, name, def, rule, 0, 0, usage)
}

// DurationAtLeast is Duration with a minimum (0: none beyond rule).
func (c *cmdLine) DurationAtLeast(p *time.Duration, name string, def time.Duration, rule durationRule, least time.Duration, usage string) {
	c.DurationRange(p, name, def, rule, least, 0, usage)
}

// DurationRange is Duration with a range: from least to most when most is
// not 0, else at least least (0: no minimum beyond rule, so that a durAny
// flag takes negative durations).
func (c *cmdLine) DurationRange(p *time.Duration, name string, def time.Duration, rule durationRule, least, most time.Duration, usage string) {
	*p = def
	c.define(&value{kind: kindDuration, typ: "duration", get: func() string { return p.String() }, set: func(s string) error {
		d, err := parseDurationValue(s, rule)
		if err != nil {
			return err
		}
		if least != 0 && d < least && most == 0 {
			return fmt.Errorf("%q is below the minimum; allowed: a Go duration string >= %v", s, least)
		}
		if most > 0 && (d < least || d > most) {
			return fmt.Errorf("%q is out of range; allowed: a Go duration string from %v to %v", s, least, most)
		}
		*p = d
		return nil
	}}, name, usage)
}

// parseDurationValue parses a Go duration string with messages like the
// HTTP API's.
func parseDurationValue(s string, rule durationRule) (time.Duration, error) {
	want := map[durationRule]string{durPositive: " > 0", durNonNegative: " >= 0", durAny: ""}[rule]
	allowed := fmt.Sprintf(`allowed: a Go duration string%s such as "250ms", "60s", "1m" or "1m30s"`, want)
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("%q is not a duration: a number needs a unit, such as %q or %q; %s", s, s+"s", s+"ms", allowed)
		}
		return 0, fmt.Errorf("%q is not a duration; %s", s, allowed)
	}
	switch {
	case d < 0 && rule != durAny:
		return 0, fmt.Errorf("%q is negative; %s", s, allowed)
	case d == 0 && rule == durPositive:
		return 0, fmt.Errorf("%q is zero; %s", s, allowed)
	}
	return d, nil
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// positive accepts f > 0 (a Float range check).
func positive(f float64) bool { return f > 0 }

// nonNegative accepts f >= 0.
func nonNegative(f float64) bool { return f >= 0 }

// zeroOrAtLeastOne accepts 0 (a default) or f >= 1.
func zeroOrAtLeastOne(f float64) bool { return f == 0 || f >= 1 }
