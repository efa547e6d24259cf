package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Register fault modes a worker-group partition uses (permitd worker
// --test-hooks, POST /v1/debug/faults {"register":MODE}).
const (
	// regFaultDrop: register calls fail at once as never delivered; the
	// sidecars spend their open grants to their local expiry.
	regFaultDrop = "drop"
	// regFaultBlackhole: register calls hang until they time out, outcome
	// unknown; the sidecars stop spending the grant a call reported on.
	regFaultBlackhole = "blackhole"
)

// beginFault applies a worker fault (kind FaultWorker) and returns its
// targets and the function that heals it (returning errors).
func (f *fleet) beginFault(ctx context.Context, ev Event, rec *NemesisRecord) ([]string, func(context.Context) []string) {
	n := len(f.sidecars)
	switch ev.Variant {
	case "isolate-group":
		groups := f.cfg.Groups
		group := fmt.Sprintf("g%d", ev.Pick%uint64(groups)+1)
		mode := regFaultDrop
		if (ev.Pick/uint64(groups))%2 == 1 {
			mode = regFaultBlackhole
		}
		var targets []string
		for _, s := range f.sidecars {
			if s.Group == group {
				targets = append(targets, s.Name)
			}
		}
		f.mu.Lock()
		f.isolated[group] = mode
		f.mu.Unlock()
		f.reconcile(ctx)
		rec.Notes = append(rec.Notes, fmt.Sprintf("group %s cut off from the register (%s): finish the lease, steal, then fail closed", group, mode))
		return targets, func(ctx context.Context) []string {
			f.mu.Lock()
			delete(f.isolated, group)
			f.mu.Unlock()
			f.reconcile(ctx)
			return nil
		}
	case "pause":
		r := rand.New(rand.NewPCG(ev.Pick, 0x7061757365))
		idx := r.Perm(n)[:(n+1)/2]
		slices.Sort(idx)
		var targets []string
		var paused []*sidecar
		for _, i := range idx {
			s := f.sidecars[i]
			if err := f.signal(s, true); err != nil {
				rec.Errors = append(rec.Errors, err.Error())
				continue
			}
			targets = append(targets, s.Name)
			paused = append(paused, s)
		}
		rec.Notes = append(rec.Notes, "SIGSTOP worker sidecars")
		return targets, func(context.Context) []string {
			var errs []string
			for _, s := range paused {
				if err := f.signal(s, false); err != nil {
					errs = append(errs, err.Error())
				}
			}
			return errs
		}
	case "kill":
		s := f.sidecars[ev.Pick%uint64(n)]
		if err := f.kill(ctx, s); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
		rec.Notes = append(rec.Notes, "kill -9 a worker sidecar, restarted at the end")
		return []string{s.Name}, func(context.Context) []string {
			if err := f.startOne(s); err != nil {
				return []string{err.Error()}
			}
			return nil
		}
	}
	rec.Errors = append(rec.Errors, "unknown worker fault variant "+ev.Variant)
	return nil, nil
}
