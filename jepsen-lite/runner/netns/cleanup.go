package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// Cleanup removes everything the run created, in order: the processes in
// its namespaces (SIGKILL by pid), the namespaces (their links and packet
// filters go with them), its links in the root namespace, and last its
// blackhole route. It looks at what exists, not at what it remembers, so
// it also removes the remains of a half-done setup, and calling it again
// changes nothing.
func (e *Env) Cleanup(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := removeOwned(ctx, e, e.owns, func(pid int) bool { return pid == e.pid })
	if !e.cleaned {
		e.cleaned = true
		if e.locked {
			netnsMu.Unlock()
		}
	}
	return err
}

// sweepStale removes the leftovers of earlier runs whose runner is gone
// (namespaces, links and blackhole routes named or marked with a pid).
func (e *Env) sweepStale(ctx context.Context) error {
	return removeOwned(ctx, e,
		func(name string) bool { return staleOwner(ownerPid(name)) },
		staleOwner)
}

// removeOwned removes the namespaces and root links whose names ownName
// accepts and the blackhole routes (proto 213, inside guardNet) whose
// metric ownPid accepts.
func removeOwned(ctx context.Context, e *Env, ownName func(string) bool, ownPid func(int) bool) error {
	var errs []error
	nss, err := e.namespaces(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	var mine []string
	for _, ns := range nss {
		if ownName(ns) {
			mine = append(mine, ns)
		}
	}
	for _, ns := range mine {
		if err := e.killIn(ctx, ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range mine {
		if _, err := e.ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		} else {
			e.logf("cleanup: deleted namespace %s", ns)
		}
	}
	links, err := e.links(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if !ownName(l) {
			continue
		}
		if _, err := e.ip(ctx, "link", "del", l); err != nil {
			// Deleting one end of a veth pair deletes the other: an end
			// already gone is not an error.
			if now, lerr := e.links(ctx); lerr != nil || slices.Contains(now, l) {
				errs = append(errs, err)
			}
		}
	}
	// The blackhole goes last, once nothing of the run is left.
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	rs, err := e.routes(ctx, routeProto)
	if err != nil {
		return err
	}
	for _, r := range rs {
		p, perr := netip.ParsePrefix(r.Dst)
		if r.Type != "blackhole" || perr != nil || !guardNet.Contains(p.Addr()) || !ownPid(r.Metric) {
			continue
		}
		if _, err := e.ip(ctx, "route", "del", "blackhole", r.Dst, "proto", routeProto, "metric", strconv.Itoa(r.Metric)); err != nil {
			errs = append(errs, err)
		} else {
			e.logf("cleanup: deleted blackhole route %s", r.Dst)
		}
	}
	return errors.Join(errs...)
}

// killIn sends SIGKILL to every process in namespace ns and waits (up to
// 10 s) until none is left.
func (e *Env) killIn(ctx context.Context, ns string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := e.ip(ctx, "netns", "pids", ns)
		if err != nil {
			return err
		}
		var pids []int
		for _, p := range strings.Fields(out) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: processes %v still in namespace %s 10s after SIGKILL", pids, ns)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			e.logf("cleanup: SIGKILL pid %d in %s", pid, ns)
		}
		_ = wait.Sleep(context.WithoutCancel(ctx), 50*time.Millisecond)
	}
}

// ownerPid returns the pid in a pdj<pid>-... name, or 0.
func ownerPid(name string) int {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// staleOwner reports whether a leftover owned by pid belongs to no
// running run: its runner is gone, or it is this process (whose runs are
// sequential, see netnsMu).
func staleOwner(pid int) bool {
	return pid > 0 && (pid == os.Getpid() || !pidAlive(pid))
}
