package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/client"
)

// reservation.go: reserves of several limits at once, all or nothing
// (permitd reserve --limit NAME=N ...), and settling and releasing the
// reservations they leave (permitd settle, permitd release).

func init() {
	register("settle", "report the permits a reservation actually used", runSettle)
	register("release", "free the in-flight permits a reservation holds", runRelease)
}

// maxLimitsPerReserve is the most limits one reserve may name.
const maxLimitsPerReserve = fsm.MaxReserveParts

// parseWant parses NAME=PERMITS with PERMITS >= minPermits.
func parseWant(s string, minPermits int64) (client.Want, error) {
	allowed := fmt.Sprintf("allowed: NAME=PERMITS, a limit name and an integer >= %d, such as tpm=4000", minPermits)
	name, n, ok := strings.Cut(s, "=")
	if !ok {
		return client.Want{}, fmt.Errorf("%q is not NAME=PERMITS (no \"=\"); %s", s, allowed)
	}
	if err := checkName("limit name", name); err != nil {
		return client.Want{}, fmt.Errorf("%q is not NAME=PERMITS: %v", s, err)
	}
	p, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return client.Want{}, fmt.Errorf("%q: permits %q is not an integer; %s", s, n, allowed)
	}
	if p < minPermits {
		return client.Want{}, fmt.Errorf("%q: %d permits; %s", s, p, allowed)
	}
	return client.Want{Limit: name, Permits: p}, nil
}

// addWant appends w to wants unless its limit is there already or wants
// is full.
func addWant(wants []client.Want, w client.Want, s string) ([]client.Want, error) {
	for _, o := range wants {
		if o.Limit == w.Limit {
			return wants, fmt.Errorf("%q: limit %q is given twice; allowed: each limit once", s, w.Limit)
		}
	}
	if len(wants) == maxLimitsPerReserve {
		return wants, fmt.Errorf("%q: limit %d; allowed: 1 to %d limits", s, len(wants)+1, maxLimitsPerReserve)
	}
	return append(wants, w), nil
}

// Wants defines a repeatable flag of NAME=PERMITS items (PERMITS >= 1),
// each limit once.
func (c *cmdLine) Wants(p *[]client.Want, name, usage string) {
	c.define(&value{kind: kindString, typ: "NAME=PERMITS", get: func() string {
		items := make([]string, len(*p))
		for i, w := range *p {
			items[i] = fmt.Sprintf("%s=%d", w.Limit, w.Permits)
		}
		return strings.Join(items, ",")
	}, set: func(s string) error {
		w, err := parseWant(s, 1)
		if err != nil {
			return err
		}
		*p, err = addWant(*p, w, s)
		return err
	}}, name, usage)
}

// usesFlag reports whether args give flag name (before a "--").
func usesFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		f, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && f == name {
			return true
		}
	}
	return false
}

// positionalCount counts the positional arguments of args as c would
// parse them (a flag's separate value is not one).
func (c *cmdLine) positionalCount(args []string) int {
	n := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return n + len(args) - i - 1
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			n++
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if v, ok := c.values[name]; ok && !hasValue && v.kind != kindBool {
			i++ // its value
		}
	}
	return n
}

// checkReservationID validates a reservation ID argument.
func checkReservationID(id string) error {
	if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 {
		return fmt.Errorf("reservation ID %q; allowed: the reservation_id a grant printed, a decimal integer >= 1", id)
	}
	return nil
}

// runReserveMany is permitd reserve --limit ...: one reserve of every
// limit of f.wants, all or nothing.
func runReserveMany(c *cmdLine, f *reserveFlags, stdout io.Writer) int {
	wants, wait := f.wants, f.wait
	o := client.ReserveOptions{MaxWait: f.maxWait, SettleWithin: f.settleWithin}
	// One reserve per run: its request ID makes retries exactly-once. It
	// may wait for its max wait in an in-flight cap's queue.
	cl, ctx, cancel, err := f.cf.clientHeld(o.MaxWait, client.WithoutSessions())
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	r, err := cl.ReserveMany(ctx, wants, o)
	if err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	limits := make([]map[string]any, len(wants))
	for i, w := range wants {
		limits[i] = map[string]any{"name": w.Limit, "permits": w.Permits}
	}
	if !r.Granted {
		msg := r.Refusal // the server's words: why, when not the max wait
		if msg == "" {
			msg = fmt.Sprintf("no grant of every limit within max wait %v; retry after %s", o.MaxWait, api.DurationText(r.RetryAfter))
			if r.Blocking != "" {
				msg = fmt.Sprintf("limit %q blocks: %s", r.Blocking, msg)
			}
		}
		printLine(stdout, map[string]any{"granted": false, "retry_after_ns": r.RetryAfter.Nanoseconds(), "blocking": r.Blocking,
			"limits": limits, "request_id": r.RequestID, "error": msg})
		return exitRefused
	}
	if r.ID == "" {
		// A grant must name its reservation; without it nothing can be
		// settled or released, so it is not reported as a grant.
		return c.fail(exitFailure, errors.New("the server granted the reserve without a reservation_id"))
	}
	line := map[string]any{"granted": true, "reservation_id": r.ID, "limits": limits, "wait_ns": r.Delay.Nanoseconds(),
		"spacing_ns": r.Spacing.Nanoseconds(), "expires_in_ns": r.ExpiresIn.Nanoseconds(), "request_id": r.RequestID, "holds": r.Holds}
	if end := r.HoldExpiresAt(); !end.IsZero() {
		// Counted from this line's printing, conservatively: the hold
		// lapses in the register no sooner.
		line["hold_expires_in_ns"] = max(time.Until(end).Nanoseconds(), -1)
	}
	printLine(stdout, line)
	if !wait {
		return exitOK
	}
	// The waits are not bounded by --timeout (a request timeout).
	if r.Spaced() {
		// One strict limit of several permits: they are spaced.
		for j := range r.Permits {
			if err := r.WaitPermit(context.Background(), j); err != nil {
				return c.fail(exitFailure, err)
			}
			printLine(stdout, map[string]any{"permit": j})
		}
		return exitOK
	}
	if err := r.Wait(context.Background()); err != nil {
		return c.fail(exitFailure, err)
	}
	printLine(stdout, map[string]any{"ready": true, "reservation_id": r.ID})
	return exitOK
}

func runSettle(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("settle", "settle ID [NAME=PERMITS ...] [--servers HTTPADDR,...]", `
Settles reservation ID (the reservation_id of a grant of permitd reserve
--limit): each NAME=PERMITS is the permits limit NAME of the reservation
actually used (an integer >= 0, each limit once); a limit not listed used
what it reserved. Unused permits go back to the limits that can take them;
use beyond the reservation is charged to the limit as debt. Prints one
JSON line {"settled":true,"reservation_id":ID,"limits":[{"name":N,
"reserved":R,"actual":A,"refunded":F,"charged":C},...]}.

Example: permitd settle 42 tpm=3512

A reservation can be settled once, within its settle window (--settle-within
of the reserve, default 1m).

Exit status: 0 settled; 1 failure (server unreachable; the reservation is
unknown, already final, or already settled); 2 usage error or input the
server rejected as invalid (nothing changed);
`+exitDeniedText+`4 also when the reservation is another token's (403).
`, stdout, stderr)
	var cf clientFlags
	cf.define(c)
	n := c.positionalCount(args)
	names := []string{"ID"}
	for len(names) < n {
		names = append(names, "NAME=PERMITS")
	}
	c.args(names...)
	if ok, code := c.parse(args); !ok {
		return code
	}
	id := c.arg(0)
	if err := checkReservationID(id); err != nil {
		return c.usageError(err.Error())
	}
	actual := []client.Want{}
	for _, s := range c.pos[1:] {
		w, err := parseWant(s, 0)
		if err == nil {
			actual, err = addWant(actual, w, s)
		}
		if err != nil {
			return c.usageError("actual use " + err.Error())
		}
	}
	settle := func(ctx context.Context, cl *client.Client) (client.SettleResult, error) {
		return cl.Settle(ctx, id, actual)
	}
	return runCall(c, &cf, settle, func(res client.SettleResult) int {
		limits := res.Limits
		if limits == nil {
			limits = []client.Settled{}
		}
		printLine(stdout, map[string]any{"settled": true, "reservation_id": id, "duplicate": res.Duplicate, "limits": limits})
		return exitOK
	})
}

func runRelease(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("release", "release ID [--servers HTTPADDR,...]", `
Releases reservation ID (the reservation_id of a grant of permitd reserve
--limit): the permits it holds of its concurrency limits are free again
(its rate limits are not touched; settle those). Prints one JSON line
{"reservation_id":ID,"released":N}: N is 0 for a second release or a hold
that had already expired.

Exit status: 0 released; 1 failure (server unreachable, the reservation is
unknown or final); 2 usage error or input the server rejected as invalid
(nothing changed);
`+exitDeniedText+`4 also when the reservation is another token's (403).
`, stdout, stderr)
	c.args("ID")
	var cf clientFlags
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	id := c.arg(0)
	if err := checkReservationID(id); err != nil {
		return c.usageError(err.Error())
	}
	release := func(ctx context.Context, cl *client.Client) (client.ReleaseResult, error) { return cl.Release(ctx, id) }
	return runCall(c, &cf, release, func(res client.ReleaseResult) int {
		printLine(stdout, map[string]any{"reservation_id": id, "released": res.Released, "duplicate": res.Duplicate})
		return exitOK
	})
}

// settleWithinMax is the longest --settle-within.
const settleWithinMax = time.Duration(fsm.MaxSettleWindowNanos)
