package fsm

import (
	"fmt"
	"strings"
)

// limitspage.go: the limits, one page at a time, for lists that must not
// grow with the register (a million templated keys).

// MaxLimitsPage bounds how many limits LimitsPage returns at once: a page
// travels in one frame between nodes (a follower asks the leader), and
// 10 000 limits are about 1.5 MB of it.
const MaxLimitsPage = 10_000

// LimitsQuery selects a page of limits: at most Size (1 to
// MaxLimitsPage) limits whose names start with Prefix ("" for any) and
// sort after After ("" from the first; it need not be a limit's name, nor
// have the prefix), in name order.
type LimitsQuery struct {
	Prefix string
	After  string
	Size   int
}

// Validate reports what is wrong with q, if anything (wrapping
// ErrInvalidCommand): Prefix and After are empty or made of the
// characters of limit names, at most MaxNameLen bytes; Size is 1 to
// MaxLimitsPage.
func (q LimitsQuery) Validate() error {
	for _, f := range []struct{ what, s string }{{"prefix", q.Prefix}, {"after", q.After}} {
		if f.s == "" {
			continue
		}
		if err := validateName(f.s); err != nil {
			return fmt.Errorf("%w: %s %q: allowed: empty, or 1-%d characters of A-Z a-z 0-9 _ . : -", ErrInvalidCommand, f.what, f.s, MaxNameLen)
		}
	}
	if q.Size < 1 || q.Size > MaxLimitsPage {
		return fmt.Errorf("%w: page size %d: allowed: 1-%d", ErrInvalidCommand, q.Size, MaxLimitsPage)
	}
	return nil
}

// LimitsPage returns the page of limits q selects (a Size out of range is
// clamped to it), and whether more limits with q's prefix follow it. It
// seeks in the ordered name index: a page costs its own size and a
// logarithm of the register's, not the register's size (and counting the
// open reservations of the page's limits walks the reservation table
// only if a live reservation names one of them).
func (f *FSM) LimitsPage(q LimitsQuery) ([]LimitInfo, bool) {
	prefix, after, size := q.Prefix, q.After, min(MaxLimitsPage, max(1, q.Size))
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := &f.st
	var page []*limit
	more, pinned := false, false
	s.names.from(max(prefix, after), func(l *limit) bool {
		name := l.name
		if name == after {
			return true // after itself is skipped
		}
		if !strings.HasPrefix(name, prefix) {
			return false
		}
		if len(page) == size {
			more = true
			return false
		}
		page = append(page, l)
		pinned = pinned || s.reservations.pins[name] > 0
		return true
	})
	if len(page) == 0 {
		return nil, more
	}
	var open map[string]int
	if pinned {
		open = s.reservations.open(s.lastNowNanos)
	}
	out := make([]LimitInfo, len(page))
	for i, l := range page {
		out[i] = l.info(s.lastNowNanos, open[l.name])
	}
	return out, more
}
