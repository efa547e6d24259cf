package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// expiredgrants.go: grants whose answers left as refusals (see doc.go,
// "Counters").
//
// The register counts a grant when it decides it. The node that sends the
// answer subtracts the time it held it (package node, answer.go), and a
// grant whose (first) permit expired meanwhile leaves as a refusal. When
// that happens is not in the log, so Apply cannot know it; the node tells
// the register in a later entry, a CmdExpiredGrants naming each such grant
// by the raft index of the entry that decided it and the limits and
// permits it granted. Apply then counts, on each of those limits, one
// expired request and its permits, which LimitInfo takes out of the
// grants and adds to the refusals. Nothing else changes: the pacer keeps
// the slots (they were spent), and a reservation's holds are freed by the
// settlement the node sends as well.
//
// A part is counted only on the limit that decided it: one that exists
// and was created before the decided index (not deleted and created again
// since), and that has counted at least that many grants and permits not
// already counted as expired; an index not before the entry's own names
// no decision. Anything else is ignored, so the counters stay consistent
// whatever a report says. A node reports a grant once and does not retry
// a report whose outcome is unknown: a grant is counted as expired at
// most once, and stays counted as granted if its report is lost.

// MaxExpiredGrants bounds the grants one CmdExpiredGrants carries.
const MaxExpiredGrants = 256

// ExpiredGrant names a grant the register decided whose (first) permit
// expired while the node that held its answer waited to send it, so that
// the answer was a refusal.
type ExpiredGrant struct {
	// DecidedIndex is the raft index of the entry that decided the grant.
	DecidedIndex uint64
	// Parts are the limits and permits it granted: the reserve's own
	// limit, then every other limit of a reserve in the reservation form
	// (Reserve.Parts).
	Parts []Part
}

// ExpiredGrantsResult is the outcome of a CmdExpiredGrants.
type ExpiredGrantsResult struct {
	// Counted is how many parts of the grants were counted as expired;
	// the others were ignored (see expiredgrants.go).
	Counted int
}

// validateExpiredGrants reports whether gs can be replicated: 1 to MaxExpiredGrants
// grants, each with a decided index >= 1 and 1 to MaxReserveParts parts
// on valid limits named once, each of >= 1 permits. The error wraps
// ErrInvalidCommand.
func validateExpiredGrants(gs []ExpiredGrant) error {
	if len(gs) < 1 || len(gs) > MaxExpiredGrants {
		return fmt.Errorf("%w: %d expired grants (allowed: 1-%d)", ErrInvalidCommand, len(gs), MaxExpiredGrants)
	}
	for _, g := range gs {
		if g.DecidedIndex == 0 {
			return fmt.Errorf("%w: expired grant decided at index 0 (allowed: >= 1)", ErrInvalidCommand)
		}
		if len(g.Parts) < 1 || len(g.Parts) > MaxReserveParts {
			return fmt.Errorf("%w: expired grant of %d limits (allowed: 1-%d)", ErrInvalidCommand, len(g.Parts), MaxReserveParts)
		}
		if err := validateParts(g.Parts, "expired grant", "of", 1); err != nil {
			return err
		}
	}
	return nil
}

// AppendExpiredGrants appends a CmdExpiredGrants entry carrying gs to b.
// On error b is returned unchanged and the error wraps ErrInvalidCommand.
func AppendExpiredGrants(b []byte, st Stamp, gs []ExpiredGrant) ([]byte, error) {
	if err := validateExpiredGrants(gs); err != nil {
		return b, err
	}
	b = appendHeader(b, CmdExpiredGrants, st)
	b = binary.AppendUvarint(b, uint64(len(gs)))
	for _, g := range gs {
		b = binary.AppendUvarint(b, g.DecidedIndex)
		b = binary.AppendUvarint(b, uint64(len(g.Parts)))
		for _, p := range g.Parts {
			b = appendBytes(b, p.Limit)
			b = binary.AppendUvarint(b, uint64(p.Permits))
		}
	}
	return b, nil
}

// decodeExpiredGrants reads a CmdExpiredGrants' grants and validates them.
func decodeExpiredGrants(r *reader, names *interner) ([]ExpiredGrant, error) {
	n := r.uvarintMax("expired grant count", MaxExpiredGrants)
	if r.err != nil {
		return nil, r.err
	}
	gs := make([]ExpiredGrant, 0, min(int(n), r.remaining()/4))
	for range int(n) {
		g := ExpiredGrant{DecidedIndex: r.uvarint("decided index")}
		k := r.uvarintMax("part count", MaxReserveParts)
		if r.err != nil {
			return nil, r.err
		}
		for range int(k) {
			name, err := decodeName(r, names)
			if err != nil {
				return nil, err
			}
			permits := r.uvarint("permits")
			if r.err != nil {
				return nil, r.err
			}
			if permits > math.MaxInt64 {
				r.fail("permits %d exceed the int64 range", permits)
				return nil, r.err
			}
			g.Parts = append(g.Parts, Part{Limit: name, Permits: int64(permits)})
		}
		gs = append(gs, g)
	}
	return gs, validateExpiredGrants(gs)
}

// countExpired applies a CmdExpiredGrants at raft index index: each part
// of each grant is counted as expired on its limit, if that limit decided
// it (see expiredgrants.go).
func (s *state) countExpired(index uint64, gs []ExpiredGrant) ExpiredGrantsResult {
	var res ExpiredGrantsResult
	for _, g := range gs {
		if g.DecidedIndex >= index {
			continue
		}
		for _, p := range g.Parts {
			// A limit created at the entry that decided the grant is the
			// templated key that entry created for it (a put decides no
			// grant, and keys are dropped before an entry decides).
			l, ok := s.limits[p.Limit]
			if !ok || l.createdIndex > g.DecidedIndex {
				continue
			}
			if t := l.tally(); t.expiredRequests >= l.grantedRequests || l.grantedPermits-t.expiredPermits < uint64(p.Permits) {
				continue
			}
			t := l.tallying()
			t.expiredRequests++
			t.expiredPermits += uint64(p.Permits)
			res.Counted++
		}
	}
	return res
}
