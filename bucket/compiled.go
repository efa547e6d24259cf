package bucket

import (
	"errors"
	"fmt"
)

// compiled.go: building pacers on configs, and checking the configs they
// are given. A Config is a plain value that anyone can edit, so New,
// Pacer.Reconfigure and Config.AppendBinary check the Config they are
// given by compiling its Spec again (validate). A Compiled is a Config
// whose check is done: it can only be made by decoding (DecodeCompiled),
// which compiles the config once, and pacers are built on it and
// reconfigured to it without compiling it again. The replicated state
// machine keeps the configs of its log entries and snapshots so.

// validate checks that c is exactly what Compile makes of c.Spec, floats
// to the bit (a -0 option compares equal to +0 but encodes otherwise, and
// Compile never yields one), so that every Config it accepts encodes to
// bytes DecodeConfig accepts.
func (c Config) validate() error {
	want, err := Compile(c.Spec)
	if err != nil {
		return err
	}
	if want != c || !sameFloatBits(want.Spec, c.Spec) {
		return fmt.Errorf("bucket: config of %s: %w (its compiled fields differ from what Compile derives from its Spec; build configs with Compile)",
			c.Spec.Algorithm, ErrInvalidOption)
	}
	return nil
}

// New returns a fresh Pacer running c whose timeline starts at
// originNanos, as Guava's RateLimiter starts at its construction: time
// that passes after the origin counts as idle time (a Bursty pacer stores
// it, a Hybrid pacer's pools fill with it), and a now before the origin
// counts as the origin. A fresh Strict pacer's first slot is the origin;
// a fresh WarmingUp pacer is cold; a fresh Hybrid pacer's active pool is
// full; a fresh Concurrency pacer holds nothing. c must come from Compile
// or DecodeConfig: New compiles c.Spec again and rejects a Config whose
// compiled fields differ (Compiled.NewPacer does not).
func New(c Config, originNanos int64) (Pacer, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return newPacer(&c, originNanos), nil
}

// newPacer is New of a checked config. The pacer keeps c, which must not
// change afterwards: the pacers built by one Compiled share its config.
func newPacer(c *Config, originNanos int64) Pacer {
	switch c.Spec.Algorithm {
	case Strict:
		return &StrictPacer{cfg: c, lastNow: originNanos, nextFree: originNanos}
	case Bursty:
		return &BurstyPacer{newSmooth(c, originNanos)}
	case WarmingUp:
		return &WarmingUpPacer{newSmooth(c, originNanos)}
	case Hybrid:
		return &HybridPacer{cfg: c, lastNow: originNanos, fillNanos: originNanos,
			pools: Pools{ActiveNanos: c.ActiveNanos}}
	}
	// Concurrency: a checked config has one of the five algorithms.
	return &ConcurrencyPacer{cfg: c, lastNow: originNanos}
}

// reconfigurer is a pacer of this package: reconfigure is its Reconfigure
// of a config already checked (of its algorithm, and exactly what Compile
// makes of its Spec). An unexported method: no other package's type has
// it.
type reconfigurer interface {
	Pacer
	reconfigure(nowNanos int64, c *Config) error
}

// reconfigure is Pacer.Reconfigure of every pacer of this package: c must
// be of p's algorithm and exactly what Compile makes of its Spec.
func reconfigure(p reconfigurer, nowNanos int64, c Config) error {
	if err := checkAlgorithm(p.Config().Spec.Algorithm, c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	return p.reconfigure(nowNanos, &c)
}

// Compiled is a Config whose check is done: what Compile makes of its
// Spec, compiled once by DecodeCompiled, the only way to make one. A
// pacer is built on it (NewPacer) and reconfigured to it (Reconfigure)
// without compiling it again, where New and Pacer.Reconfigure, given a
// Config, compile it again to check it. The pacers built on or
// reconfigured to one Compiled (and its copies) share its config instead
// of holding a copy each. The zero Compiled holds no config and must not
// be used.
type Compiled struct {
	cfg *Config
}

// DecodeCompiled decodes what Config.AppendBinary encoded, as DecodeConfig
// does (same checks, same errors), compiling the config once.
func DecodeCompiled(b []byte) (Compiled, error) {
	c, err := DecodeConfig(b)
	if err != nil {
		return Compiled{}, err
	}
	return Compiled{cfg: &c}, nil
}

// Config returns the config.
func (c Compiled) Config() Config { return *c.cfg }

// NewPacer is New(c.Config(), originNanos) without compiling the config
// again: it cannot fail.
func (c Compiled) NewPacer(originNanos int64) Pacer { return newPacer(c.cfg, originNanos) }

// errForeignPacer is the error of Compiled.Reconfigure on a pacer that is
// not of this package.
var errForeignPacer = errors.New("not a pacer of package bucket")

// Reconfigure is p.Reconfigure(nowNanos, c.Config()) without compiling the
// config again: it fails, changing nothing, only when p runs another
// algorithm (ErrInvalidAlgorithm) or is not a pacer of this package.
func (c Compiled) Reconfigure(p Pacer, nowNanos int64) error {
	r, ok := p.(reconfigurer)
	if !ok {
		return fmt.Errorf("bucket: reconfigure a %T: %w", p, errForeignPacer)
	}
	if err := checkAlgorithm(r.Config().Spec.Algorithm, *c.cfg); err != nil {
		return err
	}
	return r.reconfigure(nowNanos, c.cfg)
}
