package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// The worker faults act on the sidecars through these methods (package
// nemesis's Sidecars interface); sidecars are named by index.

// Members returns each sidecar's name and group, by index.
func (f *Fleet) Members() (names, groups []string) {
	for _, s := range f.sidecars {
		names, groups = append(names, s.Name), append(groups, s.Group)
	}
	return names, groups
}

// Isolate sets group's register fault (POST /v1/debug/faults
// {"register":mode} on each of its sidecars, pushed again to a restarted
// one; mode "" lifts it with DELETE).
func (f *Fleet) Isolate(ctx context.Context, group, mode string) {
	f.mu.Lock()
	if mode == "" {
		delete(f.isolated, group)
	} else {
		f.isolated[group] = mode
	}
	f.mu.Unlock()
	f.reconcile(ctx)
}

// Pause sends SIGSTOP to sidecar i.
func (f *Fleet) Pause(i int) error { return f.sidecars[i].proc.Pause() }

// Resume sends SIGCONT to sidecar i if it is paused.
func (f *Fleet) Resume(i int) error { return f.sidecars[i].proc.Resume() }

// Kill reads sidecar i's counters one last time, then kills it with -9
// and waits until it is reaped.
func (f *Fleet) Kill(ctx context.Context, i int) error {
	s := f.sidecars[i]
	f.read(ctx, s, 300*time.Millisecond)
	return s.proc.Kill()
}

// Start starts sidecar i again (it must be down), with the same name and
// addresses, as a new incarnation.
func (f *Fleet) Start(i int) error { return f.startOne(f.sidecars[i]) }

// HealAll lifts every register fault and the relays' cut, restarts dead
// relays and sidecars and continues paused sidecars (the final heal).
func (f *Fleet) HealAll(ctx context.Context) {
	f.mu.Lock()
	clear(f.isolated)
	f.mu.Unlock()
	f.healRelays(ctx)
	for _, s := range f.sidecars {
		if !s.proc.State().Up {
			if err := f.startOne(s); err != nil {
				f.logf("heal: %v", err)
			}
		}
		if err := s.proc.Resume(); err != nil {
			f.logf("heal: %v", err)
		}
	}
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		f.reconcile(ctx)
		if f.allHealed() {
			return
		}
		_ = wait.Sleep(ctx, 250*time.Millisecond)
	}
}

// allHealed reports whether every sidecar runs with no register fault.
func (f *Fleet) allHealed() bool {
	for _, s := range f.sidecars {
		st := s.proc.State()
		s.mu.Lock()
		ok := st.Up && !st.Paused && s.regGen == st.Generation && s.regFault == ""
		s.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// isolatedMode returns group's register fault mode ("" none).
func (f *Fleet) isolatedMode(group string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isolated[group]
}

// UnexpectedExits lists the sidecar and relay processes that exited
// without the runner's signal, as "NAME (pid P)".
func (f *Fleet) UnexpectedExits() []string {
	var out []string
	for _, s := range f.sidecars {
		out = append(out, s.proc.UnexpectedExits()...)
	}
	for _, rp := range f.relays {
		out = append(out, rp.proc.UnexpectedExits()...)
	}
	return out
}

// String describes the fleet for progress lines.
func (f *Fleet) String() string {
	s := fmt.Sprintf("%d worker sidecars in %d groups, lease ttl %v", len(f.sidecars), max(f.cfg.Groups, 1), f.cfg.Leased.TTL)
	for _, rp := range f.relays {
		var via []string
		for _, sc := range f.sidecars {
			if sc.relay == rp {
				via = append(via, sc.Name)
			}
		}
		s += fmt.Sprintf("; relay %s (upstream %s) for %s", rp.Name, rp.Upstream, strings.Join(via, ","))
	}
	return s
}
