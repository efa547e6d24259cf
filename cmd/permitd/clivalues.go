package main

import (
	"flag"
	"fmt"
	"math"
	"slices"
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
	// choices are the only values the flag takes, for a choice flag
	// (Choice, textFlag.OneOf): set checks against them, and shell
	// completion offers them.
	choices []string
	set     func(string) error
	get     func() string
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

// textFlag is a string or list flag's optional check, set by Check or
// OneOf.
type textFlag struct {
	check func(string) error
	v     *value
}

// Check makes the flag validate its value (a list flag: each item) with
// check.
func (f *textFlag) Check(check func(string) error) { f.check = check }

// OneOf makes a string flag take only one of allowed, worded as describe
// in its message; --help shows them as its type and shell completion
// offers them. Unlike Choice, the flag may stay unset ("").
func (f *textFlag) OneOf(allowed []string, describe string) {
	f.v.choices, f.v.typ = allowed, strings.Join(allowed, "|")
	f.check = func(s string) error {
		if slices.Contains(allowed, s) {
			return nil
		}
		return fmt.Errorf("%q is not allowed; allowed: %s", s, describe)
	}
}

// String defines a string flag; Check on the result adds a validation of
// a value that is set (not "").
func (c *cmdLine) String(p *string, name, typ, def, usage string) *textFlag {
	*p = def
	f := &textFlag{}
	f.v = &value{kind: kindString, typ: typ, get: func() string { return *p }, set: func(s string) error {
		if f.check != nil && s != "" { // "": not set (the default)
			if err := f.check(s); err != nil {
				return err
			}
		}
		*p = s
		return nil
	}}
	c.define(f.v, name, usage)
	return f
}

// List defines a comma-separated list flag (kept as its text; see
// splitList); Check on the result adds a validation of each item.
func (c *cmdLine) List(p *string, name, typ, def, usage string) *textFlag {
	*p = def
	f := &textFlag{}
	f.v = &value{kind: kindList, typ: typ, get: func() string { return *p }, set: func(s string) error {
		if f.check != nil {
			for _, item := range splitList(s) {
				if err := f.check(item); err != nil {
					return err
				}
			}
		}
		*p = s
		return nil
	}}
	c.define(f.v, name, usage)
	return f
}

// Choice defines a string flag that must be one of allowed (--help shows
// them as its type, shell completion offers them).
func (c *cmdLine) Choice(p *string, name, def, usage string, allowed ...string) {
	*p = def
	c.define(&value{kind: kindString, typ: strings.Join(allowed, "|"), choices: allowed, get: func() string { return *p }, set: func(s string) error {
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

// intFlag is an integer flag's range, set by Range.
type intFlag struct {
	lo, hi  int64
	allowed string
}

// Range limits the flag to [lo, hi]; allowed describes the range in
// messages (e.g. "an integer >= 1").
func (f *intFlag) Range(lo, hi int64, allowed string) { f.lo, f.hi, f.allowed = lo, hi, allowed }

// Int64 defines an integer flag; Range on the result limits it.
func (c *cmdLine) Int64(p *int64, name, typ string, def int64, usage string) *intFlag {
	*p = def
	return c.defineInt(name, typ, usage, func(n int64) { *p = n }, func() string { return strconv.FormatInt(*p, 10) })
}

// Int is Int64 for an int.
func (c *cmdLine) Int(p *int, name, typ string, def int, usage string) *intFlag {
	*p = def
	return c.defineInt(name, typ, usage, func(n int64) { *p = int(n) }, func() string { return strconv.Itoa(*p) })
}

// defineInt defines an integer flag stored by store, in the range the
// returned intFlag says (any int64 until Range).
func (c *cmdLine) defineInt(name, typ, usage string, store func(int64), get func() string) *intFlag {
	f := &intFlag{lo: math.MinInt64, hi: math.MaxInt64, allowed: "an integer"}
	c.define(&value{kind: kindInt, typ: typ, get: get, set: func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if isRangeError(err) {
				return fmt.Errorf("%q is out of range; allowed: %s", s, f.allowed)
			}
			return fmt.Errorf("%q is not an integer; allowed: %s", s, f.allowed)
		}
		if n < f.lo || n > f.hi {
			return fmt.Errorf("%d is out of range; allowed: %s", n, f.allowed)
		}
		store(n)
		return nil
	}}, name, usage)
	return f
}

// uintFlag is an unsigned integer flag's range, set by Range.
type uintFlag struct {
	lo, hi  uint64
	allowed string
}

// Range limits the flag to [lo, hi]; allowed describes the range.
func (f *uintFlag) Range(lo, hi uint64, allowed string) { f.lo, f.hi, f.allowed = lo, hi, allowed }

// Uint64 defines an unsigned integer flag; Range on the result limits it.
func (c *cmdLine) Uint64(p *uint64, name, typ string, def uint64, usage string) *uintFlag {
	*p = def
	f := &uintFlag{hi: math.MaxUint64, allowed: "an integer >= 0"}
	c.define(&value{kind: kindInt, typ: typ, get: func() string { return strconv.FormatUint(*p, 10) }, set: func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer; allowed: %s", s, f.allowed)
		}
		if n < f.lo || n > f.hi {
			return fmt.Errorf("%d is out of range; allowed: %s", n, f.allowed)
		}
		*p = n
		return nil
	}}, name, usage)
	return f
}

// floatFlag is a number flag's range, set by Check.
type floatFlag struct {
	ok      func(float64) bool
	allowed string
}

// Check limits the flag to the numbers ok accepts; allowed describes
// them in messages (e.g. "a number > 0").
func (f *floatFlag) Check(ok func(float64) bool, allowed string) { f.ok, f.allowed = ok, allowed }

// Float defines a finite number flag; Check on the result limits it.
func (c *cmdLine) Float(p *float64, name, typ string, def float64, usage string) *floatFlag {
	*p = def
	f := &floatFlag{allowed: "a number"}
	c.define(&value{kind: kindFloat, typ: typ, get: func() string { return strconv.FormatFloat(*p, 'g', -1, 64) }, set: func(s string) error {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRangeError(err) {
			return fmt.Errorf("%q is not a number; allowed: %s", s, f.allowed)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%q is not a finite number; allowed: %s", s, f.allowed)
		}
		if f.ok != nil && !f.ok(x) {
			return fmt.Errorf("%s is out of range; allowed: %s", s, f.allowed)
		}
		*p = x
		return nil
	}}, name, usage)
	return f
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

// durationFlag is a duration flag's range beyond its rule, set by
// AtLeast or Range.
type durationFlag struct{ least, most time.Duration }

// AtLeast sets a minimum (0: none beyond the rule).
func (f *durationFlag) AtLeast(least time.Duration) { f.least, f.most = least, 0 }

// Range limits the flag to [least, most] (most > 0).
func (f *durationFlag) Range(least, most time.Duration) { f.least, f.most = least, most }

// Duration defines a duration flag (a Go duration string) following rule;
// AtLeast or Range on the result limit it further (without them a durAny
// flag takes negative durations).
func (c *cmdLine) Duration(p *time.Duration, name string, def time.Duration, rule durationRule, usage string) *durationFlag {
	*p = def
	f := &durationFlag{}
	c.define(&value{kind: kindDuration, typ: "duration", get: func() string { return p.String() }, set: func(s string) error {
		d, err := parseDurationValue(s, rule)
		if err != nil {
			return err
		}
		if f.least != 0 && d < f.least && f.most == 0 {
			return fmt.Errorf("%q is below the minimum; allowed: a Go duration string >= %v", s, f.least)
		}
		if f.most > 0 && (d < f.least || d > f.most) {
			return fmt.Errorf("%q is out of range; allowed: a Go duration string from %v to %v", s, f.least, f.most)
		}
		*p = d
		return nil
	}}, name, usage)
	return f
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
