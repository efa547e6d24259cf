package auth

import (
	"strings"
	"sync/atomic"
)

// TokenStore holds a server's current tokens; Replace swaps them at once for
// every later lookup (a SIGHUP re-reads the token file).
type TokenStore struct{ p atomic.Pointer[Tokens] }

// NewTokenStore returns a store holding ts.
func NewTokenStore(ts *Tokens) *TokenStore {
	s := &TokenStore{}
	s.p.Store(ts)
	return s
}

// Replace makes ts the current tokens.
func (s *TokenStore) Replace(ts *Tokens) { s.p.Store(ts) }

// Len returns how many tokens are current.
func (s *TokenStore) Len() int { return s.p.Load().Len() }

// Current returns the current tokens. A Replace installs a new *Tokens, so
// a caller may keep a lookup's result for as long as Current returns the
// same pointer.
func (s *TokenStore) Current() *Tokens { return s.p.Load() }

// Lookup looks secret up in the current tokens (Tokens.Lookup).
func (s *TokenStore) Lookup(secret string) (Token, bool) { return s.p.Load().Lookup(secret) }

// Spec describes a token for NewTokenStoreOf: its name, role and (client
// tokens only, optional) limit patterns.
type Spec struct {
	Name   string
	Role   Role
	Limits []string
}

// NewTokenStoreOf makes a new secret for each spec (NewSecret) and returns a
// store holding them with the secrets by name: for tests and for programs
// that run a server with tokens made in memory rather than read from a
// token file. An invalid spec fails as the token file line would.
func NewTokenStoreOf(specs ...Spec) (*TokenStore, map[string]string, error) {
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
	return NewTokenStore(ts), secrets, nil
}
