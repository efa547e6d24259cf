package main

import (
	_ "embed"
	"fmt"
	"math"
	"time"
)

// gcraScript is the GCRA Lua script run by EVALSHA, one call per decision.
//
//go:embed gcra.lua
var gcraScript string

// gcraParams are the script's arguments for one limit.
type gcraParams struct {
	emissionNanos int64 // nanoseconds per permit
	burst         int64 // permits the TAT may run ahead of now
	epochSeconds  int64 // Unix seconds that the script counts time from
}

// newGCRAParams converts a rate (permits per period) and a burst into the
// script's integer arguments. It refuses a rate whose emission interval is
// less than one nanosecond, rather than clamping it.
func newGCRAParams(rate float64, per time.Duration, burst int64, epochSeconds int64) (gcraParams, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return gcraParams{}, fmt.Errorf("compare-redis: rate %v: want a finite number > 0", rate)
	}
	if per <= 0 {
		return gcraParams{}, fmt.Errorf("compare-redis: period %v: want > 0", per)
	}
	if burst < 1 {
		return gcraParams{}, fmt.Errorf("compare-redis: burst %d: want >= 1", burst)
	}
	exact := float64(per) / rate
	if exact < 1 {
		return gcraParams{}, fmt.Errorf("compare-redis: rate %v per %v: emission interval %.3gns is below 1ns; the script counts whole nanoseconds (at most 1 permit per ns)", rate, per, exact)
	}
	emission := math.Round(exact) // to the nearest nanosecond: at most 0.5ns off
	if emission > float64(math.MaxInt64/4) || float64(emission)*float64(burst) > 1<<53 {
		return gcraParams{}, fmt.Errorf("compare-redis: rate %v per %v with burst %d: emission interval × burst exceeds 2^53 ns, which Lua's doubles cannot hold exactly", rate, per, burst)
	}
	return gcraParams{emissionNanos: int64(emission), burst: burst, epochSeconds: epochSeconds}, nil
}
