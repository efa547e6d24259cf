package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/wire"
)

func init() {
	register("reserve", "reserve permits of a limit (or of several, all or nothing) once and print the answer", runReserve)
}

func runReserve(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("reserve", "reserve NAME [--permits N] [--max-wait D] [--wait] [--servers HTTPADDR,...]\n"+
		"       permitd reserve --limit NAME=PERMITS [--limit NAME=PERMITS ...] [--max-wait D] [--settle-within D] [--wait]", `
Reserves N permits of limit NAME once. Prints the grant as one JSON line
({"granted":true,"wait_ns":W,"spacing_ns":S,...}: permit j may be used
W + j*S after the answer) or the refusal ({"granted":false,
"retry_after_ns":R,...}). The command may take --timeout plus --max-wait
in all: a node may hold the answer for the max wait (without a leader its
503 comes after the max wait plus a second).

With --wait it then prints one line {"permit":J} per permit at the moment
that permit may be used (a strict limit spaces them by its interval; the
other algorithms grant them together) and exits 0 after the last, or 1 if
a permit expired before its line could be printed. A refusal never sleeps.
Use a permit when its line is printed:

  permitd reserve api --permits 3 --wait | tail -n +2 | while read -r _; do call_api; done

With --limit (1 to 8 times, each limit once) it reserves PERMITS of every
limit NAME in one decision: all are granted at one time, or none is.
The grant names a reservation: {"granted":true,"reservation_id":ID,
"wait_ns":W,"expires_in_ns":E,"limits":[...],...}; use the permits W after
the answer, then report what was really used with "permitd settle ID
NAME=PERMITS ..." (within --settle-within, default 1m) and free the
permits of concurrency limits with "permitd release ID". A reservation
that holds permits of a concurrency limit ("holds":true) also prints
"hold_expires_in_ns":H: its hold lapses in the register no sooner than H
after the line is printed (the earliest, over several; -1: lapsed), which
the call using the slot should end before. A concurrency
limit is reserved only in this form (the NAME form is refused, exit 2:
nothing could release its permits). A refusal names the limit that
blocked: {"granted":false,"blocking":NAME,"retry_after_ns":R,...}. With
--wait it prints {"ready":true,...} when the permits may be used (or one
{"permit":J} line per permit of a single strict limit).

  permitd reserve --limit rpm=1 --limit tpm=4000 --max-wait 2s

Exit status: 0 granted; 1 failure (server unreachable, limit not found, a
permit expired); 2 usage error or input the server rejected as invalid;
3 refused: no permit within --max-wait, or a strict limit that may not
reserve that far ahead (its --max-reserved; the error says which);
nothing was reserved;
`+exitDeniedText, stdout, stderr)
	// The --limit form has no NAME argument.
	many := usesFlag(args, "limit")
	if !many {
		c.args("NAME")
	}
	var f reserveFlags
	f.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	if many {
		if c.isSet("permits") {
			return c.usageError("--permits goes with the NAME form; with --limit give each limit's permits as NAME=PERMITS")
		}
		return runReserveMany(c, &f, stdout)
	}
	if c.isSet("settle-within") {
		return c.usageError("--settle-within goes with --limit (a reservation); allowed: permitd reserve --limit NAME=PERMITS --settle-within D")
	}
	name := c.arg(0)
	if err := checkName("limit name", name); err != nil {
		return c.usageError(err.Error())
	}
	return reserveOne(c, &f, name, stdout)
}

// reserveFlags are permitd reserve's settings.
type reserveFlags struct {
	cf                    clientFlags
	permits               int64
	maxWait, settleWithin time.Duration
	wait                  bool
	wants                 []client.Want
}

func (f *reserveFlags) define(c *cmdLine) {
	c.Int64(&f.permits, "permits", "N", 1, "permits to reserve").Range(1, 1<<62, "an integer >= 1")
	c.Duration(&f.maxWait, "max-wait", 0, durNonNegative, "the longest wait for the (first) permit that is acceptable")
	c.Bool(&f.wait, "wait", false, "print a line per permit when it may be used")
	c.Wants(&f.wants, "limit", "reserve PERMITS of limit NAME, all or nothing with the other --limit (1 to 8, each limit once; replaces NAME and --permits)")
	c.Duration(&f.settleWithin, "settle-within", 0, durPositive, "with --limit: how long after the grant the reservation can be settled (default 1m)").Range(time.Nanosecond, settleWithinMax)
	f.cf.define(c)
}

// reserveOne is permitd reserve NAME: one reserve of f.permits of limit
// name, printed, and with --wait a line per permit when it may be used.
func reserveOne(c *cmdLine, f *reserveFlags, name string, stdout io.Writer) int {
	// One reserve per run: a request ID makes its retries exactly-once
	// without the extra round trip (and log entry) of opening a session.
	// A node may hold the answer for the max wait (a concurrency limit's
	// queue, or no leader: its 503 comes after max wait plus a second):
	// each attempt, and the command, may take that much longer, so that
	// the answer, and its cause, arrives.
	cl, ctx, cancel, err := f.cf.clientHeld(f.maxWait, client.WithoutSessions(),
		client.WithAttemptTimeout(wire.AddNanos(client.DefaultAttemptTimeout, f.maxWait)))
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	g, err := cl.Reserve(ctx, name, f.permits, f.maxWait)
	if err != nil {
		if isInFlightCap(err) {
			// The server names its API; say the command that does it.
			fmt.Fprintf(c.stderr, "permitd %s: %s; allowed: permitd reserve --limit %s=%d, then permitd release ID when the call ends\n",
				c.name, oneLine(describeError(err)), name, f.permits)
			return exitCodeOf(err)
		}
		return c.fail(exitCodeOf(err), err)
	}
	if !g.Granted {
		// The server's words say why: no permit within the max wait, or a
		// strict limit that may not reserve ahead (its max_reserved).
		msg := g.Refusal
		if msg == "" {
			msg = fmt.Sprintf("limit %q: no permit within max wait %v; retry after %s", name, f.maxWait, api.DurationText(g.RetryAfter))
		}
		out := map[string]any{"granted": false, "retry_after_ns": g.RetryAfter.Nanoseconds(), "request_id": g.RequestID, "error": msg}
		if g.KeysFull {
			// A template's cap on keys, not the limit's rate.
			out["keys_full"] = true
		}
		printLine(stdout, out)
		return exitRefused
	}
	printLine(stdout, map[string]any{"granted": true, "permits": g.Permits, "wait_ns": g.Delay.Nanoseconds(),
		"spacing_ns": g.Spacing.Nanoseconds(), "expires_in_ns": g.ExpiresIn.Nanoseconds(), "request_id": g.RequestID})
	if f.wait {
		for j := range g.Permits {
			// The waits are not bounded by --timeout (a request timeout):
			// a grant of spaced permits may take longer to use.
			if err := g.WaitPermit(context.Background(), j); err != nil {
				return c.fail(exitFailure, err)
			}
			printLine(stdout, map[string]any{"permit": j})
		}
	}
	return exitOK
}

// isInFlightCap reports whether err is the server's refusal (400) of a
// single-limit reserve on a concurrency limit, which only the reservation
// form (reserve --limit) may hold.
func isInFlightCap(err error) bool {
	var api *client.APIError
	return errors.As(err, &api) && api.StatusCode == http.StatusBadRequest &&
		strings.Contains(api.Message, "is an in-flight cap")
}
