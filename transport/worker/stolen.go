package worker

import "slices"

// lot is a batch of permits received from a donor: they belong to the
// donor's grant (the donor reports them as stolen out) and may be spent
// until deadlineNanos, the taker's request send time plus the validity the
// donor measured on its own clock after receiving the request.
type lot struct {
	donor         string
	permits       int64
	deadlineNanos int64
	// leaseID and epoch name the donor's grant.
	leaseID, epoch uint64
}

// lots are the stolen permits a worker holds, earliest deadline first.
type lots []lot

// add inserts l in deadline order.
func (ls *lots) add(l lot) {
	i, _ := slices.BinarySearchFunc(*ls, l.deadlineNanos, func(e lot, t int64) int {
		switch {
		case e.deadlineNanos < t:
			return -1
		case e.deadlineNanos > t:
			return 1
		}
		return 0
	})
	*ls = slices.Insert(*ls, i, l)
}

// prune removes the lots whose deadline is <= now and returns how many
// permits they still held (expired unused).
func (ls *lots) prune(nowNanos int64) (expired int64) {
	k := 0
	for k < len(*ls) && (*ls)[k].deadlineNanos <= nowNanos {
		expired += (*ls)[k].permits
		k++
	}
	*ls = slices.Delete(*ls, 0, k)
	return expired
}

// total returns the permits held in unexpired lots at now.
func (ls lots) total(nowNanos int64) int64 {
	var n int64
	for _, l := range ls {
		if l.deadlineNanos > nowNanos {
			n += l.permits
		}
	}
	return n
}

// take removes n permits from the unexpired lots at now, earliest deadline
// first, calling took (if not nil) for each lot it takes from. The caller
// checked that total(now) >= n.
func (ls *lots) take(nowNanos, n int64, took func(l lot, k int64)) {
	for i := 0; n > 0 && i < len(*ls); i++ {
		l := &(*ls)[i]
		if l.deadlineNanos <= nowNanos {
			continue
		}
		k := min(n, l.permits)
		l.permits -= k
		n -= k
		if took != nil {
			took(*l, k)
		}
	}
	*ls = slices.DeleteFunc(*ls, func(l lot) bool { return l.permits == 0 })
}
