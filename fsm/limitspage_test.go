package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// LimitsPage walks the limits with a prefix page by page, each limit
// once, in name order, whatever the page size; more is true exactly when
// a limit with the prefix follows the page.
func TestLimitsPage(t *testing.T) {
	h := newHarness(t)
	var all []string
	for _, p := range []string{"a", "api:", "api:x", "apj", "b:", "zz"} {
		for k := range 7 {
			name := fmt.Sprintf("%s%d", p, k)
			if p == "api:x" {
				name = fmt.Sprintf("api:x%d", k)
			}
			h.put(int64(len(all)), name, strict(t, 1000, 0))
			all = append(all, name)
		}
	}
	slices.Sort(all)
	for _, prefix := range []string{"", "a", "api:", "api:x", "b:", "c", "zz6", "zzz"} {
		var want []string
		for _, n := range all {
			if strings.HasPrefix(n, prefix) {
				want = append(want, n)
			}
		}
		for _, size := range []int{1, 2, 3, 7, 100, MaxLimitsPage} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > len(all)+1 {
					t.Fatalf("prefix %q size %d: no end after %d pages", prefix, size, pages)
				}
				page, more := h.f.LimitsPage(LimitsQuery{prefix, after, size})
				if len(page) > size {
					t.Fatalf("prefix %q size %d: a page of %d", prefix, size, len(page))
				}
				for _, l := range page {
					got = append(got, l.Name)
				}
				if !more {
					break
				}
				if len(page) == 0 {
					t.Fatalf("prefix %q size %d after %q: an empty page with more", prefix, size, after)
				}
				after = page[len(page)-1].Name
			}
			if !slices.Equal(got, want) {
				t.Errorf("prefix %q size %d: got %v, want %v", prefix, size, got, want)
			}
		}
	}
	// after need not be a limit's name, nor have the prefix.
	for _, tc := range []struct {
		prefix, after string
		want          []string
		more          bool
	}{
		{"api:", "api:4", []string{"api:5", "api:6"}, true},
		{"api:", "api:6", []string{"api:x0", "api:x1"}, true},
		{"api:", "api:x6", nil, false},
		{"api:", "a", []string{"api:0", "api:1"}, true},
		{"api:", "b", nil, false},
		{"", "zz5", []string{"zz6"}, false},
		{"", "zzz", nil, false},
	} {
		page, more := h.f.LimitsPage(LimitsQuery{tc.prefix, tc.after, 2})
		var got []string
		for _, l := range page {
			got = append(got, l.Name)
		}
		if !slices.Equal(got, tc.want) || more != tc.more {
			t.Errorf("prefix %q after %q: %v more=%v, want %v more=%v", tc.prefix, tc.after, got, more, tc.want, tc.more)
		}
	}
	// Sizes out of range are clamped, and a page is what Limits says.
	page, _ := h.f.LimitsPage(LimitsQuery{Size: 0})
	if len(page) != 1 {
		t.Errorf("size 0: %d limits, want 1", len(page))
	}
	page, more := h.f.LimitsPage(LimitsQuery{Size: MaxLimitsPage + 1})
	if more || !slices.EqualFunc(page, h.f.Limits(), func(a, b LimitInfo) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		t.Errorf("one page of every limit differs from Limits")
	}
}

// A query is valid over the whole range the edge accepts, and invalid
// just outside it, with a message naming what is allowed.
func TestLimitsQueryValidate(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen)
	for _, q := range []LimitsQuery{{Size: 1}, {Size: MaxLimitsPage}, {Prefix: "a", After: "b", Size: 5}, {Prefix: long, After: long, Size: 1}, {Prefix: "api:", Size: 1}} {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	for _, tc := range []struct {
		q       LimitsQuery
		mention string
	}{
		{LimitsQuery{Size: 0}, "page size 0: allowed: 1-10000"},
		{LimitsQuery{Size: MaxLimitsPage + 1}, "page size 10001"},
		{LimitsQuery{Size: -1}, "page size -1"},
		{LimitsQuery{Prefix: "a b", Size: 1}, "prefix \"a b\": allowed: empty, or 1-"},
		{LimitsQuery{After: long + "a", Size: 1}, "after"},
		{LimitsQuery{After: "x/y", Size: 1}, "after \"x/y\""},
	} {
		err := tc.q.Validate()
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%+v: %v; want ErrInvalidCommand mentioning %q", tc.q, err, tc.mention)
		}
	}
}
