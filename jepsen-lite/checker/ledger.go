package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// TokenKind is the kind of a TokenEvent.
type TokenKind int

// The token movements. Tokens are created only by Credit (the register
// giving them out); Transfer and Spend debit an account first and fail if
// it has too few.
const (
	// Credit moves Tokens from the register to account To (a grant, or
	// later a lease).
	Credit TokenKind = iota + 1
	// Transfer moves Tokens from account From to account To (a steal, a
	// lease handed to a group member).
	Transfer
	// Spend uses Tokens of account From at the API (one call = 1 token).
	Spend
)

// String names the kind.
func (k TokenKind) String() string {
	switch k {
	case Credit:
		return "credit"
	case Transfer:
		return "transfer"
	case Spend:
		return "spend"
	}
	return fmt.Sprintf("TokenKind(%d)", int(k))
}

// TokenEvent is one movement of tokens.
type TokenEvent struct {
	Kind TokenKind
	// TimeNanos orders the events (ties: credits, then transfers, then
	// spends). Use math.MinInt64 for a credit whose time is not in the
	// spends' time base, so it counts before every spend.
	TimeNanos int64
	// From is the debited account (Transfer, Spend).
	From string
	// To is the credited account (Credit, Transfer).
	To string
	// Tokens moved (> 0).
	Tokens int64
	// Source describes the event for violation messages.
	Source string
}

// GrantAccount is the ledger account of the grant with request ID id.
func GrantAccount(id string) string { return "grant:" + id }

// ledgerTotals are the sums a ledger run reports.
type ledgerTotals struct {
	credited, transferred, spent int64
	overdrafts                   int
}

// runLedger applies events in time order to per-account balances and
// reports, into r, every debit of more tokens than its account holds at
// that moment. The overdrawn debit is not applied.
func runLedger(events []TokenEvent, r *Result) (ledgerTotals, error) {
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b TokenEvent) int {
		if c := cmp.Compare(a.TimeNanos, b.TimeNanos); c != 0 {
			return c
		}
		return cmp.Compare(a.Kind, b.Kind)
	})
	bal := make(map[string]int64)
	opened := make(map[string]bool) // accounts ever credited
	var t ledgerTotals
	for _, e := range sorted {
		if e.Tokens <= 0 {
			return t, fmt.Errorf("%w: token event %s (%s) moves %d tokens; allowed: > 0", ErrInvalid, e.Kind, e.Source, e.Tokens)
		}
		switch e.Kind {
		case Credit:
			if e.To == "" {
				return t, fmt.Errorf("%w: credit (%s) without an account", ErrInvalid, e.Source)
			}
			bal[e.To] += e.Tokens
			opened[e.To] = true
			t.credited += e.Tokens
		case Transfer, Spend:
			if e.Kind == Transfer && e.To == "" {
				return t, fmt.Errorf("%w: transfer (%s) without a destination", ErrInvalid, e.Source)
			}
			if bal[e.From] < e.Tokens {
				t.overdrafts++
				switch {
				case e.From == "":
					r.violate("%s: no grant backs it (no account)", e.Source)
				case !opened[e.From]:
					r.violate("%s: account %s was never credited (no ok grant)", e.Source, e.From)
				default:
					r.violate("%s: account %s holds %d tokens, needs %d (tokens spent twice)", e.Source, e.From, bal[e.From], e.Tokens)
				}
				continue
			}
			bal[e.From] -= e.Tokens
			if e.Kind == Transfer {
				bal[e.To] += e.Tokens
				opened[e.To] = true
				t.transferred += e.Tokens
			} else {
				t.spent += e.Tokens
			}
		default:
			return t, fmt.Errorf("%w: token event kind %d (%s); allowed: credit, transfer, spend", ErrInvalid, int(e.Kind), e.Source)
		}
	}
	return t, nil
}

// beforeAll is the time of a credit that counts before every spend.
const beforeAll = math.MinInt64
