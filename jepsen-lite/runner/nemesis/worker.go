package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Register fault modes a worker-group partition uses (permitd worker
// --test-hooks, POST /v1/debug/faults {"register":MODE}).
const (
	// RegisterDrop: register calls fail at once as never delivered; the
	// sidecars spend their open grants to their local expiry.
	RegisterDrop = "drop"
	// RegisterBlackhole: register calls hang until they time out, outcome
	// unknown; the sidecars stop spending the grant a call reported on.
	RegisterBlackhole = "blackhole"
)

// beginWorkerFault applies a worker fault (kind FaultWorker) and returns
// its targets and the function that heals it (returning errors).
func (nm *Nemesis) beginWorkerFault(ctx context.Context, ev Event, rec *Record) ([]string, func(context.Context) []string) {
	if nm.fleet == nil {
		rec.Errors = append(rec.Errors, "worker faults need the leased workload's sidecars")
		return nil, nil
	}
	return workerFault(ctx, nm.fleet, max(nm.cfg.Groups, 1), ev, rec)
}

// workerFault applies worker fault ev to f's sidecars in groups groups.
func workerFault(ctx context.Context, f Sidecars, groups int, ev Event, rec *Record) ([]string, func(context.Context) []string) {
	names, groupOf := f.Members()
	n := len(names)
	if n == 0 {
		rec.Errors = append(rec.Errors, "no worker sidecars")
		return nil, nil
	}
	switch ev.Variant {
	case "isolate-group":
		group := fmt.Sprintf("g%d", ev.Pick%uint64(groups)+1)
		mode := RegisterDrop
		if (ev.Pick/uint64(groups))%2 == 1 {
			mode = RegisterBlackhole
		}
		var targets []string
		for i, name := range names {
			if groupOf[i] == group {
				targets = append(targets, name)
			}
		}
		f.Isolate(ctx, group, mode)
		rec.Notes = append(rec.Notes, fmt.Sprintf("group %s cut off from the register (%s): finish the lease, steal, then fail closed", group, mode))
		return targets, func(ctx context.Context) []string {
			f.Isolate(ctx, group, "")
			return nil
		}
	case "pause":
		r := rand.New(rand.NewPCG(ev.Pick, 0x7061757365))
		idx := r.Perm(n)[:(n+1)/2]
		slices.Sort(idx)
		var targets []string
		var paused []int
		for _, i := range idx {
			if err := f.Pause(i); err != nil {
				rec.Errors = append(rec.Errors, err.Error())
				continue
			}
			targets = append(targets, names[i])
			paused = append(paused, i)
		}
		rec.Notes = append(rec.Notes, "SIGSTOP worker sidecars")
		return targets, func(context.Context) []string {
			var errs []string
			for _, i := range paused {
				if err := f.Resume(i); err != nil {
					errs = append(errs, err.Error())
				}
			}
			return errs
		}
	case "kill":
		i := int(ev.Pick % uint64(n))
		if err := f.Kill(ctx, i); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
		rec.Notes = append(rec.Notes, "kill -9 a worker sidecar, restarted at the end")
		return []string{names[i]}, func(context.Context) []string {
			if err := f.Start(i); err != nil {
				return []string{err.Error()}
			}
			return nil
		}
	}
	rec.Errors = append(rec.Errors, "unknown worker fault variant "+ev.Variant)
	return nil, nil
}
