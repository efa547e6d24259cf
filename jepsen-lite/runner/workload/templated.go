package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/transport/client"
)

// Templated: many keys "Prefix:k<i>" of one template, created by the
// register on first use and dropped when idle; workers reserve on hot keys
// and in short bursts on cold ones, and come back to a cold key about
// when it may have been dropped.
const Templated = "templated"

// TemplatedConfig is what the templated workers need.
type TemplatedConfig struct {
	// Prefix is the template's: keys are "Prefix:k0" to "Prefix:k<Keys-1>".
	Prefix string
	// Keys is the number of keys; the first HotKeys are hot.
	Keys, HotKeys int
	// Algorithm is the keys' algorithm (strict, bursty or hybrid): strict
	// permits are used one by one before they expire, the others under
	// the window discipline (MaxAnswerRTT, MaxLateUse).
	Algorithm string
	// Idle is the template's idle time: a worker comes back to a cold key
	// it used between 0.8 and 2 idle times later.
	Idle time.Duration
}

// Key names key i.
func (c TemplatedConfig) Key(i int) string { return fmt.Sprintf("%s:k%d", c.Prefix, i) }

// TemplatedStats counts what the templated workers saw.
type TemplatedStats struct {
	// KeysFull counts the reserves refused because the key cap was full
	// (429 keys_full); NotFound those answered "unknown limit" (a key of
	// a deleted template, once dropped).
	KeysFull int64 `json:"keys_full"`
	NotFound int64 `json:"not_found"`
	// KeysGranted is the number of distinct keys granted at least once;
	// Revisits the reserves on a cold key the worker had used before.
	KeysGranted int64 `json:"keys_granted"`
	Revisits    int64 `json:"revisits"`
}

type templatedCounters struct {
	keysFull, notFound, revisits atomic.Int64
	granted                      [1 << 12]atomic.Bool
	keysGranted                  atomic.Int64
}

// TemplatedStats returns the templated workers' counts.
func (w *Workers) TemplatedStats() TemplatedStats {
	t := &w.tmpl
	return TemplatedStats{KeysFull: t.keysFull.Load(), NotFound: t.notFound.Load(), KeysGranted: t.keysGranted.Load(), Revisits: t.revisits.Load()}
}

// recent is a cold key a worker used, and when.
type recent struct {
	key  int
	used time.Time
}

// runTemplated runs worker id of the templated workload until ctx ends:
// pick a key (a hot one two times in five; else, one time in three, a
// cold key it used 0.8 to 2 idle times ago; else a cold key at random),
// reserve on it (a cold key: 1 to 4 reserves back to back), use the
// permits as the direct workers do, again.
func (w *Workers) runTemplated(ctx context.Context, id int) error {
	tc := w.cfg.Templated
	c, err := w.client(id)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(w.cfg.Seed^0x74656d706c, uint64(id)))
	draws := newPermitDraws(w.cfg.Seed, id, w.cfg.MaxPermits)
	name := Name(id, w.cfg.Groups)
	var mine []recent
	for i := 0; i < maxWorkerOps && ctx.Err() == nil; i++ {
		w.pool.PausePoint(ctx, id)
		if ctx.Err() != nil {
			break
		}
		key, burst := w.pickKey(rng, &mine)
		for b := 0; b < burst && ctx.Err() == nil; b++ {
			again, err := w.reserveKey(ctx, id, name, c, rng, tc.Key(key), draws.next())
			if err != nil {
				return err
			}
			if !again {
				break
			}
		}
		if key >= tc.HotKeys {
			mine = append(mine, recent{key, time.Now()})
			if len(mine) > 16 {
				mine = mine[1:]
			}
		}
	}
	return nil
}

// pickKey draws the next key and how many reserves to send on it.
func (w *Workers) pickKey(rng *rand.Rand, mine *[]recent) (key, burst int) {
	tc := w.cfg.Templated
	cold := tc.Keys - tc.HotKeys
	switch r := rng.IntN(15); {
	case tc.HotKeys > 0 && (r < 6 || cold == 0):
		return rng.IntN(tc.HotKeys), 1
	case r < 9:
		now := time.Now()
		for j, m := range *mine {
			if age := now.Sub(m.used); age >= tc.Idle*4/5 && age <= 2*tc.Idle {
				*mine = append((*mine)[:j], (*mine)[j+1:]...)
				w.tmpl.revisits.Add(1)
				return m.key, 1 + rng.IntN(4)
			}
		}
	}
	return tc.HotKeys + rng.IntN(cold), 1 + rng.IntN(4)
}

// reserveKey sends one reserve of n permits on key and uses the permits
// if granted. again is false after a refusal or an error (the burst on
// the key ends). Only history errors are returned.
func (w *Workers) reserveKey(ctx context.Context, id int, name string, c *client.Client, rng *rand.Rand, key string, n int64) (again bool, err error) {
	req := history.ReserveRequest{Limit: key, Permits: n, MaxWaitNanos: int64(w.cfg.MaxWait)}
	inv, err := w.hw.Invoke(id, "", history.FReserve, "", req)
	if err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	g, rerr := c.Reserve(rctx, key, n, w.cfg.MaxWait)
	cancel()
	switch {
	case rerr != nil:
		typ := w.reserveFailed(rerr)
		if typ == history.Fail && isNotFound(rerr) {
			w.tmpl.notFound.Add(1)
		}
		if _, err := w.hw.Complete(inv, typ, "", "", history.ReserveResponse{Error: rerr.Error()}); err != nil {
			return false, err
		}
		errorBackoff(ctx, rng)
		return false, nil
	case !g.Granted:
		w.counters.refused.Add(1)
		resp := history.ReserveResponse{RetryAfterNanos: int64(g.RetryAfter), Duplicate: g.Duplicate, KeysFull: g.KeysFull}
		if g.KeysFull {
			w.tmpl.keysFull.Add(1)
			resp.Error = "keys_full: " + g.Refusal
		}
		if _, err := w.hw.Complete(inv, history.Fail, "", g.RequestID, resp); err != nil {
			return false, err
		}
		back := min(max(g.RetryAfter, 5*time.Millisecond), 2*w.cfg.Interval)
		_ = wait.Sleep(ctx, back/2+time.Duration(rng.Int64N(int64(back/2)+1)))
		return false, nil
	}
	w.counters.granted.Add(1)
	w.counters.permitsGranted.Add(n)
	if n > 1 {
		w.counters.multiPermitGrants.Add(1)
	}
	w.markGranted(key)
	comp, err := w.hw.Complete(inv, history.OK, "", g.RequestID, history.ReserveResponse{
		Granted: true, WaitNanos: int64(g.Delay), ExpiresInNanos: int64(g.ExpiresIn), SpacingNanos: int64(g.Spacing), Duplicate: g.Duplicate})
	if err != nil {
		return false, err
	}
	return true, w.usePermits(ctx, id, name, key, g, n, w.start.Add(time.Duration(comp.TimeNanos)))
}

// markGranted counts key among the keys granted at least once.
func (w *Workers) markGranted(key string) {
	var i int
	if _, err := fmt.Sscanf(key[len(w.cfg.Templated.Prefix)+2:], "%d", &i); err != nil || i < 0 || i >= len(w.tmpl.granted) {
		return
	}
	if !w.tmpl.granted[i].Swap(true) {
		w.tmpl.keysGranted.Add(1)
	}
}
