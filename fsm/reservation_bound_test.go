package fsm

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// The bound through reservations: seeded random mixes of multi-limit
// reserves over every algorithm, single-limit reserves, settlements that
// report fewer permits than reserved (refunded or lost), releases and time
// that stands still or jumps. Reserves that wait in the in-flight cap's
// queue are granted later, by a release or a lapse, with their rate parts
// served from then (TakeWaiterDecisions). From the answers alone it
// rebuilds the
// permits each limit served (a refunded part counts what it used, a part
// whose refund was lost what it reserved) and checks each limit's own
// bound as bucket/doc.go states it: strict slots at least I apart; bursty
// floor((W+MaxStored)/I) + n_last; warmup floor(W/I) + n_last; hybrid
// floor((A+B+W+floor(B*W/A))/I); concurrency at most MaxInFlight held at
// any instant. A refund that gave back more than the limit can take would
// show here as a window over its bound.

// boundGrant is a part of a grant as the answers tell it: served at atNanos
// with n permits (n the permits used once a refund applied).
type boundGrant struct {
	atNanos, n int64
	// Concurrency: the hold's expiry, and releases (time, permits) that
	// shortened it.
	expiresAtNanos int64
	releases       []boundRelease
}

type boundRelease struct{ atNanos, n int64 }

// boundPart locates one part of a reservation in the record.
type boundPart struct {
	limit string
	index int // into grants[limit]
	n     int64
}

func TestReservationsKeepEveryLimitsBound(t *testing.T) {
	cfgs := map[string]bucket.Config{
		"s": compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 10, MaxReserved: 3, Expiry: time.Millisecond}),
		"b": compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 50, MaxBurstSeconds: 0.2}),
		"w": compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: 20, Warmup: time.Second}),
		"y": compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 30, BurstRatio: 1.5}),
		"c": compile(t, bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: 3, HoldTTL: time.Second}),
	}
	names := []string{"b", "c", "s", "w", "y"}
	var refunds, partial, lost, releases, queuedReserves, waiterGrants int
	for seed := range 160 {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xb0))
		h := newHarness(t)
		now := int64(time.Second)
		for _, n := range names {
			h.put(now, n, cfgs[n])
		}
		grants := map[string][]boundGrant{}
		reservations := map[uint64][]boundPart{}
		queued := map[uint64][]Part{}
		var ids []uint64
		grant := func(id uint64, at int64, parts []Part) {
			var rec []boundPart
			for _, p := range parts {
				g := boundGrant{atNanos: at, n: p.Permits}
				if p.Limit == "c" {
					g.expiresAtNanos = at + int64(cfgs["c"].Spec.HoldTTL)
				}
				grants[p.Limit] = append(grants[p.Limit], g)
				rec = append(rec, boundPart{limit: p.Limit, index: len(grants[p.Limit]) - 1, n: p.Permits})
			}
			reservations[id] = rec
			ids = append(ids, id)
		}
		// drain records the waiters an entry granted (before its own
		// command: a settlement or release may act on one at once).
		drain := func() {
			for _, d := range h.f.TakeWaiterDecisions() {
				if d.Result.Status == Granted {
					grant(d.Reservation, d.ServedAtNanos, queued[d.Reservation])
					waiterGrants++
				}
				delete(queued, d.Reservation)
			}
		}
		for range 300 {
			switch p := rng.IntN(100); {
			case p < 8:
			case p < 95:
				now += rng.Int64N(int64(100 * time.Millisecond))
			default:
				now += rng.Int64N(int64(3 * time.Second))
			}
			switch p := rng.IntN(100); {
			case p < 55:
				pick := slices.Clone(names)
				rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
				pick = pick[:1+rng.IntN(4)]
				parts := make([]Part, len(pick))
				for i, n := range pick {
					parts[i] = Part{Limit: n, Permits: 1}
					if n != "c" && (n != "s" || len(pick) == 1) {
						parts[i].Permits = 1 + rng.Int64N(3)
					}
				}
				q := tracked(rng.Int64N(int64(time.Second)), parts...)
				res := h.reserve1(now, q)
				drain()
				if res.Status == Queued {
					// Granted later, when the cap frees (or refused).
					queued[res.ReservationID] = parts
					queuedReserves++
				}
				if res.Status != Granted {
					continue
				}
				grant(res.ReservationID, res.NowNanos+res.WaitNanos, parts)
			case p < 70:
				n := []string{"b", "s", "w", "y"}[rng.IntN(4)]
				r := Reserve{Limit: n, Permits: 1 + rng.Int64N(2), MaxWaitNanos: rng.Int64N(int64(time.Second))}
				res := h.reserve1(now, r)
				drain()
				if res.Status == Granted {
					grants[n] = append(grants[n], boundGrant{atNanos: res.NowNanos + res.WaitNanos, n: r.Permits})
				}
			case p < 90 && len(ids) > 0:
				id := ids[rng.IntN(len(ids))]
				c := Settle{Reservation: id}
				for _, bp := range reservations[id] {
					if rng.IntN(3) > 0 {
						c.Actual = append(c.Actual, Part{Limit: bp.limit, Permits: rng.Int64N(bp.n + 1)})
					}
				}
				res := h.settleCmd(now, c)
				drain()
				if res.Status != Settled || res.Duplicate {
					continue
				}
				for i, sp := range res.Parts {
					bp := reservations[id][i]
					g := &grants[bp.limit][bp.index]
					switch {
					case bp.limit == "c" && sp.Refunded > 0:
						g.releases = append(g.releases, boundRelease{now, sp.Refunded})
					case sp.Refunded > 0:
						if sp.Refunded > sp.Reserved-sp.Actual {
							t.Fatalf("seed %d: settlement refunded %d of %d reserved, %d used", seed, sp.Refunded, sp.Reserved, sp.Actual)
						}
						if sp.Refunded < sp.Reserved-sp.Actual {
							partial++
						}
						// The grant served what was not refunded (a late
						// refund may take back only part of the unused).
						g.n = sp.Reserved - sp.Refunded
						refunds++
					case sp.Actual < sp.Reserved && bp.limit != "c":
						lost++
					}
				}
			case len(ids) > 0:
				id := ids[rng.IntN(len(ids))]
				res := h.releaseCmd(now, Release{Reservation: id})
				drain()
				for _, bp := range reservations[id] {
					if bp.limit == "c" && res.Released > 0 {
						g := &grants["c"][bp.index]
						g.releases = append(g.releases, boundRelease{now, res.Released})
						releases++
					}
				}
			}
		}
		for _, n := range names {
			if why := checkLimitBound(cfgs[n], grants[n]); why != "" {
				t.Fatalf("seed %d: limit %q (%s): %s", seed, n, cfgs[n].Spec.Algorithm, why)
			}
		}
	}
	t.Logf("%d refunds (%d partial late refunds), %d lost, %d releases, %d queued reserves, %d granted from the queue",
		refunds, partial, lost, releases, queuedReserves, waiterGrants)
	if refunds == 0 || partial == 0 || lost == 0 || releases == 0 || waiterGrants == 0 {
		t.Errorf("weak test: %d refunds, %d partial late refunds, %d lost refunds, %d releases, %d granted from the queue",
			refunds, partial, lost, releases, waiterGrants)
	}
}

// checkLimitBound checks the grants of one limit against its bound, and
// returns what is wrong ("" if nothing).
func checkLimitBound(c bucket.Config, gs []boundGrant) string {
	i := c.IntervalNanos
	switch c.Spec.Algorithm {
	case bucket.Strict:
		var slots []int64
		for _, g := range gs {
			for k := range g.n {
				slots = append(slots, g.atNanos+k*i)
			}
		}
		slices.Sort(slots)
		for k := 1; k < len(slots); k++ {
			if slots[k]-slots[k-1] < i {
				return "two used slots " + time.Duration(slots[k]-slots[k-1]).String() + " apart, interval " + time.Duration(i).String()
			}
		}
	case bucket.Concurrency:
		for _, at := range gs {
			var held int64
			for _, g := range gs {
				if g.atNanos <= at.atNanos && at.atNanos < g.expiresAtNanos {
					held += g.n
					for _, r := range g.releases {
						if r.atNanos <= at.atNanos {
							held -= r.n
						}
					}
				}
			}
			if held > c.Spec.MaxInFlight {
				return "more permits held at once than max_in_flight"
			}
		}
	default:
		sorted := slices.Clone(gs)
		slices.SortStableFunc(sorted, func(a, b boundGrant) int { return int(min(max(a.atNanos-b.atNanos, -1), 1)) })
		for a := range sorted {
			var sum int64
			for b := a; b < len(sorted); b++ {
				sum += sorted[b].n
				w := sorted[b].atNanos - sorted[a].atNanos
				if big.NewInt(sum).Cmp(windowBound(c, w, sorted[b].n)) > 0 {
					return "a window of " + time.Duration(w).String() + " serves more permits than the bound"
				}
			}
		}
	}
	return ""
}

// windowBound is the most permits the limit serves in a window of length w
// whose last grant has nLast permits (bucket/doc.go, "Bounds").
func windowBound(c bucket.Config, w, nLast int64) *big.Int {
	bi := big.NewInt
	i := bi(c.IntervalNanos)
	q := func(x *big.Int) *big.Int { return new(big.Int).Quo(x, i) }
	switch c.Spec.Algorithm {
	case bucket.Bursty:
		return new(big.Int).Add(q(bi(w+c.MaxStoredNanos)), bi(nLast))
	case bucket.WarmingUp:
		return new(big.Int).Add(q(bi(w)), bi(nLast))
	}
	a, b := bi(c.ActiveNanos), bi(c.BurstNanos)
	share := new(big.Int).Quo(new(big.Int).Mul(b, bi(w)), a)
	total := new(big.Int).Add(new(big.Int).Add(a, b), new(big.Int).Add(bi(w), share))
	return q(total)
}
