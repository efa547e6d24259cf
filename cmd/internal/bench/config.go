package bench

import (
	"crypto/tls"
	"time"
)

// Config are the settings of a bench run: what the run loops
// (run.go, open.go, overload.go, inflight.go) read.
type Config struct {
	Servers     []string
	Limit       string
	Algorithm   string
	Rate        float64
	Per         time.Duration
	Create      bool
	Mode        string
	Concurrency int
	OpenRate    float64
	Duration    time.Duration
	Warmup      time.Duration
	MaxWait     time.Duration
	Permits     int64
	RequestIDs  bool
	MaxRequests int64
	Protocol    string
	BinaryConns int
	// Limits > 0 sends multi-limit reserves (POST /v1/reserve) naming
	// that many limits: Limit, Limit-2, ..., each created alike; Settle
	// is their settle window.
	Limits int
	Settle time.Duration
	// Keys > 0 reserves on templated keys: each reserve names
	// Limit:k<i>, i drawn at random below Keys (Keys 1: the one hot key
	// Limit:k0), and Create puts the template of prefix Limit (KeyIdle
	// its idle time, Keys its most keys) instead of a limit.
	Keys    int
	KeyIdle time.Duration
	// TLS is nil without TLS; token "" without a token.
	TLS   *tls.Config
	Token string
	// --mode overload (overload.go).
	OverloadFactor      float64
	CapacityPasses      int
	CapacityDuration    time.Duration
	CapacityConcurrency int
	Control             bool
	// openDrain bounds the open loop's wait for the answers outstanding
	// at its end; 0 is openDrainTimeout (no flag: tests shorten it).
	openDrain time.Duration
	// --mode inflight (inflight.go): the cap, its hold TTL and how
	// long each caller holds its grant.
	MaxInFlight   int64
	HoldTTL, Hold time.Duration
}
