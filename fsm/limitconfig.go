package fsm

import "github.com/permitd/permitd/bucket"

// limitconfig.go: the configs limits run, shared. Limits put with the
// same config (the keys of one template, the tenants of one plan) point at
// one limitConfig, and their pacers at its bucket.Config, instead of each
// holding a copy of the config, its encoding and a compiled copy: a
// config costs its few hundred bytes once, not once per limit. The table
// is derived from the limits (it is not in snapshots, Restore rebuilds
// it) and is only looked up by a config's bytes, never iterated, so it
// cannot make replicas differ.

// limitConfig is one config as the limits that run it share it. Nothing
// in it changes once made, except refs.
type limitConfig struct {
	cfg bucket.Config
	// compiled builds and reconfigures the limits' pacers: they share its
	// config.
	compiled bucket.Compiled
	// raw is cfg's canonical encoding (bucket.Config.AppendBinary), as
	// put entries carry it and snapshots store it; the table's key.
	raw string
	// maxPermits caches cfg.MaxPermits().
	maxPermits int64
	// refs counts the limits that run it: at 0 it leaves the table.
	refs int
}

// configTable holds the configs of the live limits by their encoding.
type configTable map[string]*limitConfig

// lookup returns the config encoded as raw if a limit runs it.
func (t configTable) lookup(raw []byte) (*limitConfig, bool) {
	c, ok := t[string(raw)]
	return c, ok
}

// acquire returns the shared config encoded as raw (compiled: its
// decoding), counting one more limit that runs it.
func (t configTable) acquire(raw []byte, compiled bucket.Compiled) *limitConfig {
	c, ok := t[string(raw)]
	if !ok {
		c = &limitConfig{cfg: compiled.Config(), compiled: compiled, raw: string(raw)}
		c.maxPermits = c.cfg.MaxPermits()
		t[c.raw] = c
	}
	c.refs++
	return c
}

// release counts one limit fewer that runs c (nil: none).
func (t configTable) release(c *limitConfig) {
	if c == nil {
		return
	}
	if c.refs--; c.refs == 0 {
		delete(t, c.raw)
	}
}
