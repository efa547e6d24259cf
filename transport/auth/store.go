package auth

import (
	"strings"
	"sync/atomic"
)

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

// Spec describes a token for NewStoreOf: its name, role and (client
// tokens only, optional) limit patterns.
type Spec struct {
	Name   string
	Role   Role
	Limits []string
}

// NewStoreOf makes a new secret for each spec (NewSecret) and returns a
// store holding them with the secrets by name: for tests and for programs
// that run a server with tokens made in memory rather than read from a
// token file. An invalid spec fails as the token file line would.
func NewStoreOf(specs ...Spec) (*Store, map[string]string, error) {
	secrets := make(map[string]string, len(specs))
	var lines []string
	for _, s := range specs {
		secret, line, err := NewSecret(s.Name, s.Role, s.Limits)
		if err != nil {
			return nil, nil, err
		}
		secrets[s.Name], lines = secret, append(lines, line)
	}
	ts, err := ParseTokenFile(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		return nil, nil, err
	}
	return NewStore(ts), secrets, nil
}
