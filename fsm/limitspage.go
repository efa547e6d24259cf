package fsm

import (
	"fmt"
	"slices"
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
// reads the sorted name index: a page costs its own size and a binary
// search, not the register's size (apart from counting the open
// reservations of the page's limits, a walk of the reservation table).
func (f *FSM) LimitsPage(q LimitsQuery) ([]LimitInfo, bool) {
	prefix, after, size := q.Prefix, q.After, min(MaxLimitsPage, max(1, q.Size))
	f.mu.RLock()
	defer f.mu.RUnlock()
	names := f.st.names
	start, _ := slices.BinarySearch(names, prefix)
	if after >= prefix {
		// The first name sorting after after: after itself is skipped.
		i, found := slices.BinarySearch(names, after)
		if found {
			i++
		}
		start = max(start, i)
	}
	end := start
	for end < len(names) && end-start < size && strings.HasPrefix(names[end], prefix) {
		end++
	}
	more := end < len(names) && strings.HasPrefix(names[end], prefix)
	if end == start {
		return nil, more
	}
	open := f.st.reservations.open(f.st.lastNowNanos)
	out := make([]LimitInfo, 0, end-start)
	for _, name := range names[start:end] {
		out = append(out, f.st.limits[name].info(f.st.lastNowNanos, open[name]))
	}
	return out, more
}
