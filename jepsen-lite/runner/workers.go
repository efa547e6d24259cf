package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/transport/client"
)

// Worker discipline of the window workload, whose permits do not expire:
// a worker uses a grant only if its answer came back within maxAnswerRTT
// of sending the reserve and it woke up within maxLateUse of the permit's
// ready time. So a permit is used at most maxAnswerRTT + maxLateUse after
// the slot the register decided, which is what the window check's
// tolerance allows for (plus the measured delivery jitter).
const (
	maxAnswerRTT = 100 * time.Millisecond
	maxLateUse   = 20 * time.Millisecond
	// maxWorkerOps bounds one worker's loop.
	maxWorkerOps = 1_000_000
)

// WorkerStats counts what the workers did.
type WorkerStats struct {
	// Reserves by outcome.
	Granted int64 `json:"granted"`
	Refused int64 `json:"refused"`
	Failed  int64 `json:"failed"`
	Unknown int64 `json:"unknown"`
	// Grants not used: expired (strict: past expires_in, counted from the
	// send), stale (window: answer slower than maxAnswerRTT), late
	// (window: woke up more than maxLateUse after ready).
	SkippedExpired int64 `json:"skipped_expired"`
	SkippedStale   int64 `json:"skipped_stale"`
	SkippedLate    int64 `json:"skipped_late"`
	// API calls made and failed.
	APICalls  int64 `json:"api_calls"`
	APIErrors int64 `json:"api_errors"`
	// PermitsGranted sums the permits of the grants; MultiPermitGrants
	// counts the grants of more than one permit (--max-permits).
	PermitsGranted    int64 `json:"permits_granted"`
	MultiPermitGrants int64 `json:"multi_permit_grants"`
}

type workerCounters struct {
	granted, refused, failed, unknown         atomic.Int64
	skippedExpired, skippedStale, skippedLate atomic.Int64
	apiCalls, apiErrors                       atomic.Int64
	permitsGranted, multiPermitGrants         atomic.Int64
}

func (c *workerCounters) snapshot() WorkerStats {
	return WorkerStats{
		Granted: c.granted.Load(), Refused: c.refused.Load(), Failed: c.failed.Load(), Unknown: c.unknown.Load(),
		SkippedExpired: c.skippedExpired.Load(), SkippedStale: c.skippedStale.Load(), SkippedLate: c.skippedLate.Load(),
		APICalls: c.apiCalls.Load(), APIErrors: c.apiErrors.Load(),
		PermitsGranted: c.permitsGranted.Load(), MultiPermitGrants: c.multiPermitGrants.Load(),
	}
}

// permitDraws draws the number of permits of each reserve (Config.
// MaxPermits): 1 three times in four, else uniform in 2..max. Each worker
// has its own sequence, seeded by the run's seed and the worker's id, so
// the same seed asks for the same counts in the same order.
type permitDraws struct {
	rng *rand.Rand
	max int64
}

func newPermitDraws(seed uint64, id int, max int64) *permitDraws {
	return &permitDraws{rng: rand.New(rand.NewPCG(seed^0x7065726d697473, uint64(id))), max: max}
}

// next returns the next reserve's permit count.
func (d *permitDraws) next() int64 {
	if d.max <= 1 || d.rng.IntN(4) != 0 {
		return 1
	}
	return 2 + d.rng.Int64N(d.max-1)
}

// workerPool holds the workers' pause switches (the worker pause nemesis:
// workers are goroutines of the runner, so SIGSTOP is emulated by blocking
// them at their pause points: before a reserve, and between a grant's
// ready time and its use, where a real pause would make a client
// oversleep).
type workerPool struct {
	n      int
	mu     sync.Mutex
	paused map[int]chan struct{} // closed on resume
}

func newWorkerPool(n int) *workerPool { return &workerPool{n: n, paused: map[int]chan struct{}{}} }

// pickHalf returns ceil(n/2) workers chosen by pick, sorted.
func (wp *workerPool) pickHalf(pick uint64) []int {
	r := rand.New(rand.NewPCG(pick, 0x776f726b))
	out := r.Perm(wp.n)[:(wp.n+1)/2]
	slices.Sort(out)
	return out
}

func (wp *workerPool) pause(ids []int) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, id := range ids {
		if _, ok := wp.paused[id]; !ok {
			wp.paused[id] = make(chan struct{})
		}
	}
}

func (wp *workerPool) resume(ids []int) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, id := range ids {
		if ch, ok := wp.paused[id]; ok {
			close(ch)
			delete(wp.paused, id)
		}
	}
}

func (wp *workerPool) resumeAll() {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for id, ch := range wp.paused {
		close(ch)
		delete(wp.paused, id)
	}
}

// pausePoint blocks while worker id is paused, or until ctx ends.
func (wp *workerPool) pausePoint(ctx context.Context, id int) {
	wp.mu.Lock()
	ch, ok := wp.paused[id]
	wp.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// workload is what the workers share.
type workload struct {
	cfg      Config
	start    time.Time
	hw       *history.Writer
	api      *fakeapi.Client
	limit    string
	servers  []string
	pool     *workerPool
	counters workerCounters
}

// workerName names worker id, with its group.
func (wl *workload) workerName(id int) string {
	return fmt.Sprintf("g%d-w%d", id%wl.cfg.Groups+1, id)
}

// run runs worker id until ctx ends: reserve n permits (n drawn by
// permitDraws), wait for each permit's turn, use it at the fake API (one
// call per permit, naming it), again. Every reserve and API call is in the
// history.
func (wl *workload) run(ctx context.Context, id int) error {
	servers := slices.Clone(wl.servers)
	k := id % len(servers)
	servers = append(servers[k:], servers[:k]...) // spread first attempts
	c, err := client.New(servers,
		client.WithAttemptTimeout(1500*time.Millisecond), client.WithRounds(2),
		client.WithBackoff(25*time.Millisecond, 500*time.Millisecond), client.WithSeed(wl.cfg.Seed+uint64(id)))
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(wl.cfg.Seed, uint64(id)))
	draws := newPermitDraws(wl.cfg.Seed, id, wl.cfg.MaxPermits)
	name := wl.workerName(id)
	for i := 0; i < maxWorkerOps && ctx.Err() == nil; i++ {
		wl.pool.pausePoint(ctx, id)
		if ctx.Err() != nil {
			break
		}
		n := draws.next()
		req := history.ReserveRequest{Limit: wl.limit, Permits: n, MaxWaitNanos: int64(wl.cfg.MaxWait)}
		inv, err := wl.hw.Invoke(id, "", history.FReserve, "", req)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		g, rerr := c.Reserve(rctx, wl.limit, n, wl.cfg.MaxWait)
		cancel()
		switch {
		case rerr != nil && (errors.Is(rerr, client.ErrInvalid) || errors.Is(rerr, client.ErrNotFound)):
			wl.counters.failed.Add(1)
			if _, err := wl.hw.Complete(inv, history.Fail, "", "", history.ReserveResponse{Error: rerr.Error()}); err != nil {
				return err
			}
			_ = sleepCtx(ctx, time.Duration(50+rng.IntN(100))*time.Millisecond)
			continue
		case rerr != nil:
			wl.counters.unknown.Add(1)
			if _, err := wl.hw.Complete(inv, history.Info, "", "", history.ReserveResponse{Error: rerr.Error()}); err != nil {
				return err
			}
			_ = sleepCtx(ctx, time.Duration(50+rng.IntN(100))*time.Millisecond)
			continue
		case !g.Granted:
			wl.counters.refused.Add(1)
			if _, err := wl.hw.Complete(inv, history.Fail, "", g.RequestID, history.ReserveResponse{RetryAfterNanos: int64(g.RetryAfter), Duplicate: g.Duplicate}); err != nil {
				return err
			}
			back := min(g.RetryAfter, 2*wl.cfg.Interval)
			_ = sleepCtx(ctx, max(back/2+time.Duration(rng.Int64N(int64(back/2)+1)), 5*time.Millisecond))
			continue
		}
		wl.counters.granted.Add(1)
		wl.counters.permitsGranted.Add(n)
		if n > 1 {
			wl.counters.multiPermitGrants.Add(1)
		}
		comp, err := wl.hw.Complete(inv, history.OK, "", g.RequestID, history.ReserveResponse{
			Granted: true, WaitNanos: int64(g.Delay), ExpiresInNanos: int64(g.ExpiresIn), SpacingNanos: int64(g.Spacing), Duplicate: g.Duplicate})
		if err != nil {
			return err
		}
		if err := wl.usePermits(ctx, id, name, g, n, wl.start.Add(time.Duration(comp.TimeNanos))); err != nil {
			return err
		}
	}
	return nil
}

// usePermits uses the n permits of grant g, received at recv, each at its
// own turn: permit j is ready at recv + wait + j·spacing (all together
// when the spacing is 0). recv is the completion as recorded (a little
// after the client received the answer), so the history's own arithmetic
// never finds a call before its permit was ready. A permit that is no
// longer usable (strict: expired; window: stale or late) is skipped, never
// used; the next one may still be. It returns only history errors.
func (wl *workload) usePermits(ctx context.Context, id int, name string, g client.Grant, n int64, recv time.Time) error {
	for j := int64(0); j < n; j++ {
		ready := recv.Add(g.Delay + time.Duration(j)*g.Spacing)
		if sleepCtx(ctx, time.Until(ready)) != nil {
			return nil
		}
		wl.pool.pausePoint(ctx, id)
		now := time.Now()
		if !wl.usable(g, j, ready, now) {
			continue
		}
		sent := int64(now.Sub(wl.start))
		ainv, err := wl.hw.Invoke(id, "", history.FAPICall, g.RequestID, history.APICallValue{Worker: name, Permit: j})
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, cerr := wl.api.Call(actx, fakeapi.CallRequest{Worker: name, RequestID: g.RequestID, SentNanos: &sent, Permit: &j})
		cancel()
		if cerr != nil {
			wl.counters.apiErrors.Add(1)
			if _, err := wl.hw.Complete(ainv, history.Info, "", "", history.APICallValue{Worker: name, Permit: j, Error: cerr.Error()}); err != nil {
				return err
			}
			continue
		}
		wl.counters.apiCalls.Add(1)
		if _, err := wl.hw.Complete(ainv, history.OK, "", "", history.APICallValue{Worker: name, Permit: j, Status: 200}); err != nil {
			return err
		}
	}
	return nil
}

// usable applies the workload's use discipline to permit j of a grant at
// now.
func (wl *workload) usable(g client.Grant, j int64, ready, now time.Time) bool {
	switch wl.cfg.Workload {
	case WorkloadStrict:
		// expires_in < 0: a replayed grant that already expired. Permit j
		// expires at SentAt + expires_in + j·spacing.
		if exp := g.ExpiresAtPermit(j); g.ExpiresIn < 0 || (!exp.IsZero() && now.After(exp)) {
			wl.counters.skippedExpired.Add(1)
			return false
		}
	default:
		if g.ReceivedAt.Sub(g.SentAt) > maxAnswerRTT {
			wl.counters.skippedStale.Add(1)
			return false
		}
		if now.Sub(ready) > maxLateUse {
			wl.counters.skippedLate.Add(1)
			return false
		}
	}
	return true
}
