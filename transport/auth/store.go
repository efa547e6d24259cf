package auth

import "sync/atomic"

// Store holds a server's current tokens; Replace swaps them at once for
// every later lookup (a SIGHUP re-reads the token file).
type Store struct{ p atomic.Pointer[Tokens] }

// NewStore returns a store holding ts.
func NewStore(ts *Tokens) *Store {
	s := &Store{}
	s.p.Store(ts)
	return s
}

// Replace makes ts the current tokens.
func (s *Store) Replace(ts *Tokens) { s.p.Store(ts) }

// Len returns how many tokens are current.
func (s *Store) Len() int { return s.p.Load().Len() }

// Current returns the current tokens. A Replace installs a new *Tokens, so
// a caller may keep a lookup's result for as long as Current returns the
// same pointer.
func (s *Store) Current() *Tokens { return s.p.Load() }

// Lookup looks secret up in the current tokens (Tokens.Lookup).
func (s *Store) Lookup(secret string) (Token, bool) { return s.p.Load().Lookup(secret) }
