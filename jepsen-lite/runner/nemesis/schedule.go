package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Event is one fault of a schedule: Fault/Variant from At until Until
// (offsets from the start of the workload). Which nodes it hits is decided
// when it starts ("the leader" is whoever leads then), from Pick; every
// other random parameter is drawn when the schedule is generated, so a
// seed replays the same schedule.
type Event struct {
	// Fault is the kind (partition, kill, pause, clock, loss, snapshot,
	// worker, transfer, reconfig, relay).
	Fault string `json:"fault"`
	// Variant is one of the kind's variants.
	Variant string `json:"variant"`
	// At and Until bound the fault's window.
	At    time.Duration `json:"at_ns"`
	Until time.Duration `json:"until_ns"`
	// Pick drives the choice of targets among the candidates at start.
	Pick uint64 `json:"pick"`
	// Clock faults: the offset jump and the rate.
	ClockOffset time.Duration `json:"clock_offset_ns,omitempty"`
	ClockRate   float64       `json:"clock_rate,omitempty"`
	// Loss faults: the loss probability per write, the delay and jitter.
	Loss   float64       `json:"loss,omitempty"`
	Delay  time.Duration `json:"delay_ns,omitempty"`
	Jitter time.Duration `json:"jitter_ns,omitempty"`
	// Reconfig faults: the factor the limit's interval is multiplied by
	// during the window (generated: 2 or 3, and for the leased workload
	// sometimes Workers+2, below one worker's fair share; 0 means 2).
	Factor int `json:"factor,omitempty"`
	// Ambient marks a fault composed on top of another one (clock or
	// loss).
	Ambient bool `json:"ambient,omitempty"`
}

// Name is "kind:variant".
func (e Event) Name() string { return e.Fault + ":" + e.Variant }

// Validate checks a pinned event against the fault window [0, healAt].
func (e Event) Validate(healAt time.Duration) error {
	if !slices.Contains(variants[e.Fault], e.Variant) {
		return fmt.Errorf("%w: scheduled fault %s: unknown kind or variant", ErrInvalid, e.Name())
	}
	if e.At < 0 || e.Until <= e.At || e.Until > healAt {
		return fmt.Errorf("%w: scheduled fault %s from %v until %v; allowed: 0 <= at < until <= the final heal at %v", ErrInvalid, e.Name(), e.At, e.Until, healAt)
	}
	if e.Fault == FaultClock && (e.ClockRate < 0 || e.ClockRate > 100) {
		return fmt.Errorf("%w: scheduled fault %s: clock rate %v; allowed: 0 (= 1) to 100", ErrInvalid, e.Name(), e.ClockRate)
	}
	if e.Fault == FaultLoss && !(e.Loss >= 0 && e.Loss <= 1) {
		return fmt.Errorf("%w: scheduled fault %s: loss %v; allowed: [0, 1]", ErrInvalid, e.Name(), e.Loss)
	}
	if e.Fault == FaultReconfig && (e.Factor < 0 || e.Factor == 1 || e.Factor > MaxReconfigFactor) {
		return fmt.Errorf("%w: scheduled fault %s: factor %d; allowed: 0 (= 2) or 2 to %d (the limit slows down)", ErrInvalid, e.Name(), e.Factor, MaxReconfigFactor)
	}
	return nil
}

// Schedule timing bounds.
const (
	minWindow   = 4 * time.Second
	maxWindow   = 8 * time.Second
	minQuiet    = 2 * time.Second
	maxQuiet    = 4 * time.Second
	maxEvents   = 2000
	ambientProb = 0.3
	// MaxReconfigFactor bounds how much a reconfig fault slows the limit.
	MaxReconfigFactor = 100
)

// Generate returns the schedule for c (c.Schedule when it is pinned): from Warmup until Duration − Tail
// (the final heal), fault windows of 4–8 s separated by 2–4 s of quiet.
// Each window holds one primary fault, a kind and variant drawn from
// c.Specs; with probability 0.3 a clock or loss fault (when listed) is
// composed on top of it for the same window. Deterministic in c.Seed and
// the configuration.
func Generate(c Config) []Event {
	if len(c.Schedule) > 0 {
		return slices.Clone(c.Schedule)
	}
	if len(c.Specs) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6a65707365656e))
	heal := c.Duration - c.Tail
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []Event
	for t := c.Warmup; t+minWindow <= heal && len(out) < maxEvents; {
		spec := c.Specs[rng.IntN(len(c.Specs))]
		vs := PickableVariants(spec, c.Nodes)
		ev := Event{Fault: spec.Kind, Variant: vs[rng.IntN(len(vs))], At: t, Pick: rng.Uint64()}
		ev.Until = min(t+between(minWindow, maxWindow), heal)
		if ev.Fault == FaultSnapshot {
			ev.Until = min(t+maxWindow+2*time.Second, heal) // time for the leader to compact
		}
		fillParams(c, &ev, rng)
		out = append(out, ev)
		var ambient []Spec
		for _, n := range c.Specs {
			if (n.Kind == FaultClock || n.Kind == FaultLoss) && n.Kind != ev.Fault {
				ambient = append(ambient, n)
			}
		}
		if len(ambient) > 0 && rng.Float64() < ambientProb {
			spec := ambient[rng.IntN(len(ambient))]
			vs := PickableVariants(spec, c.Nodes)
			amb := Event{Fault: spec.Kind, Variant: vs[rng.IntN(len(vs))], At: ev.At, Until: ev.Until, Pick: rng.Uint64(), Ambient: true}
			fillParams(c, &amb, rng)
			out = append(out, amb)
		}
		t = ev.Until + between(minQuiet, maxQuiet)
	}
	return out
}

// fillParams draws the fault's parameters.
func fillParams(c Config, ev *Event, rng *rand.Rand) {
	switch ev.Fault {
	case FaultClock:
		switch ev.Variant {
		case "skew-leader", "skew-one", "skew-followers":
			ev.ClockOffset = time.Hour
			if rng.IntN(2) == 0 {
				ev.ClockOffset = -time.Hour
			}
			ev.ClockRate = 1
		default: // rate-*: 0.5 to 2
			ev.ClockRate = float64(50+rng.IntN(151)) / 100
		}
	case FaultReconfig:
		ev.Factor = 2 + rng.IntN(2)
		if c.Leased && rng.IntN(3) == 0 {
			// Slow enough that one worker's fair share of the old rate
			// (1/Workers of it) is above the new rate: the shares of the
			// leases granted before the change are then out of the new
			// rate's range, which a snapshot must still restore.
			ev.Factor = min(c.Workers+2, MaxReconfigFactor)
		}
	case FaultLoss:
		ev.Loss = float64(1+rng.IntN(10)) / 100
		ev.Delay = time.Duration(2+rng.IntN(19)) * time.Millisecond
		ev.Jitter = time.Duration(rng.IntN(11)) * time.Millisecond
	}
}
