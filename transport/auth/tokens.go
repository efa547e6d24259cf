package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
)

// ErrInvalid is returned for a token file, secret or header that breaks
// the rules of this package.
var ErrInvalid = errors.New("auth: invalid")

// Role is what a token may do.
type Role string

// The roles.
const (
	RoleAdmin  Role = "admin"
	RoleClient Role = "client"
	RoleWorker Role = "worker"
)

// ParseRole returns the role called s.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleClient, RoleWorker:
		return r, nil
	}
	return "", fmt.Errorf("%w: role %q: allowed: admin, client, worker", ErrInvalid, s)
}

// Token is one entry of a token file.
type Token struct {
	Name string
	Role Role
	// Limits restricts a client token to the limits whose names match
	// one of these patterns (path.Match); empty: every limit.
	Limits []string
	hash   [sha256.Size]byte
}

// MayUse reports whether t may act on limit name: always for admin and
// worker tokens and unrestricted client tokens, else when a pattern
// matches.
func (t Token) MayUse(limit string) bool {
	if len(t.Limits) == 0 {
		return true
	}
	for _, p := range t.Limits {
		if ok, _ := path.Match(p, limit); ok {
			return true
		}
	}
	return false
}

// Tokens is a parsed token file.
type Tokens struct {
	list []Token
}

// Len is the number of tokens.
func (ts *Tokens) Len() int { return len(ts.list) }

// Lookup returns the token whose secret is secret. It hashes secret and
// compares the hash with every entry in constant time.
func (ts *Tokens) Lookup(secret string) (Token, bool) {
	h := sha256.Sum256([]byte(secret))
	found := -1
	for i := range ts.list {
		if subtle.ConstantTimeCompare(h[:], ts.list[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return ts.list[found], true
}

// MaxTokenFileBytes bounds a token file.
const MaxTokenFileBytes = 1 << 20

// maxLineBytes bounds one line of a token file.
const maxLineBytes = 4096

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ParseTokenFile parses a token file (format in doc.go). Every error
// names the line and what is allowed; none repeats a hash.
func ParseTokenFile(r io.Reader) (*Tokens, error) {
	// The whole file is read first: a file over the bound is rejected,
	// never parsed cut short (a cut line could widen a token's patterns).
	data, err := io.ReadAll(io.LimitReader(r, MaxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: read token file: %w", err)
	}
	if len(data) > MaxTokenFileBytes {
		return nil, fmt.Errorf("%w: token file larger than %d bytes", ErrInvalid, MaxTokenFileBytes)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1024), maxLineBytes)
	ts := &Tokens{}
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]int{}
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: token file line %d: %v", ErrInvalid, n, err)
		}
		if prev, ok := names[t.Name]; ok {
			return nil, fmt.Errorf("%w: token file line %d: name %q is already on line %d: names are unique", ErrInvalid, n, t.Name, prev)
		}
		if prev, ok := hashes[t.hash]; ok {
			return nil, fmt.Errorf("%w: token file line %d: the same secret's hash is already on line %d: make a new secret per token", ErrInvalid, n, prev)
		}
		names[t.Name], hashes[t.hash] = n, n
		ts.list = append(ts.list, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: token file line %d: longer than %d bytes", ErrInvalid, n+1, maxLineBytes)
		}
		return nil, fmt.Errorf("auth: read token file: %w", err)
	}
	return ts, nil
}

// parseLine parses "NAME ROLE sha256:HEX [limits=P,...]".
func parseLine(line string) (Token, error) {
	f := strings.Fields(line)
	for i, field := range f {
		if strings.HasPrefix(field, secretPrefix) {
			// Not repeated: a secret pasted into the file must not reach
			// a log through this error.
			return Token{}, fmt.Errorf("field %d looks like a secret (%s...): the file holds the secret's sha256 only, the line permitd tokens create prints", i+1, secretPrefix)
		}
	}
	if len(f) < 3 || len(f) > 4 {
		return Token{}, fmt.Errorf("%d fields: allowed: NAME ROLE sha256:HEX [limits=PATTERN,...]", len(f))
	}
	if !namePattern.MatchString(f[0]) {
		return Token{}, fmt.Errorf("name %q: allowed: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", f[0])
	}
	role, err := ParseRole(f[1])
	if err != nil {
		return Token{}, fmt.Errorf("role %q: allowed: admin, client, worker", f[1])
	}
	t := Token{Name: f[0], Role: role}
	hexPart, ok := strings.CutPrefix(f[2], "sha256:")
	if !ok || len(hexPart) != 2*sha256.Size || strings.ToLower(hexPart) != hexPart {
		return Token{}, errors.New("hash: allowed: sha256: and 64 lowercase hex digits (the line permitd tokens create prints)")
	}
	if _, err := hex.Decode(t.hash[:], []byte(hexPart)); err != nil {
		return Token{}, errors.New("hash: allowed: sha256: and 64 lowercase hex digits (the line permitd tokens create prints)")
	}
	if len(f) == 4 {
		list, ok := strings.CutPrefix(f[3], "limits=")
		if !ok {
			//lint:ignore ST1005 the message ends with the token line's own syntax, as the three-fields message does
			return Token{}, fmt.Errorf("fourth field %q: allowed: limits=PATTERN,...", f[3])
		}
		if role != RoleClient {
			return Token{}, fmt.Errorf("limits= on a %s token: allowed on client tokens only", role)
		}
		for _, p := range strings.Split(list, ",") {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return Token{}, fmt.Errorf("limit pattern %q: allowed: a path.Match pattern ('*', '?', '[...]'), not empty", p)
			}
			t.Limits = append(t.Limits, p)
		}
	}
	return t, nil
}

// secretPrefix starts every secret this package makes.
const secretPrefix = "pmt_"

// NewSecret returns a new random secret and the token file line that
// grants it role under name (limits: a client token's patterns, or
// none).
func NewSecret(name string, role Role, limits []string) (secret, line string, err error) {
	if !namePattern.MatchString(name) || strings.HasPrefix(name, secretPrefix) {
		return "", "", fmt.Errorf("%w: name %q: allowed: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, not %s", ErrInvalid, name, secretPrefix)
	}
	for _, p := range limits {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.ContainsAny(p, ", \t\n") {
			return "", "", fmt.Errorf("%w: limit pattern %q: allowed: a path.Match pattern ('*', '?', '[...]'), not empty, without spaces or commas", ErrInvalid, p)
		}
	}
	line = name + " " + string(role) + " sha256:" + strings.Repeat("0", 2*sha256.Size)
	if len(limits) > 0 {
		line += " limits=" + strings.Join(limits, ",")
	}
	if _, err := parseLine(line); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("auth: random secret: %w", err)
	}
	secret = secretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(secret))
	line = name + " " + string(role) + " sha256:" + hex.EncodeToString(h[:])
	if len(limits) > 0 {
		line += " limits=" + strings.Join(limits, ",")
	}
	return secret, line, nil
}

// SetLine returns the token file data with line (a token line, as
// NewSecret makes) in place of the line of the same name, or appended if
// there is none (replaced says which); every other line, comments and
// blank lines included, is kept as it was. data must be a valid token file
// and the result is one: an error names the line that breaks a rule.
func SetLine(data []byte, line string) (out []byte, replaced bool, err error) {
	t, err := parseLine(line)
	if err != nil {
		return nil, false, fmt.Errorf("%w: new line: %v", ErrInvalid, err)
	}
	if _, err := ParseTokenFile(bytes.NewReader(data)); err != nil {
		return nil, false, err
	}
	var b bytes.Buffer
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if l == "" {
			continue
		}
		trimmed := strings.TrimSpace(l)
		if f := strings.Fields(trimmed); len(f) > 0 && !strings.HasPrefix(trimmed, "#") && f[0] == t.Name {
			if !replaced {
				b.WriteString(line + "\n")
			}
			replaced = true
			continue
		}
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteByte('\n')
		}
	}
	if !replaced {
		b.WriteString(line + "\n")
	}
	if _, err := ParseTokenFile(bytes.NewReader(b.Bytes())); err != nil {
		return nil, false, err
	}
	return b.Bytes(), replaced, nil
}
