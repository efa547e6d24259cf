package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/permitd/permitd/transport/client"
)

func init() {
	register("reserve", "reserve permits of a limit once and print the answer", runReserve)
}

func runReserve(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("reserve", "reserve NAME [--permits N] [--max-wait D] [--wait] [--servers HTTPADDR,...]", `
Reserves N permits of limit NAME once. Prints the grant as one JSON line
({"granted":true,"wait_ns":W,"spacing_ns":S,...}: permit j may be used
W + j*S after the answer) or the refusal ({"granted":false,
"retry_after_ns":R,...}).

With --wait it then prints one line {"permit":J} per permit at the moment
that permit may be used (a strict limit spaces them by its interval; the
other algorithms grant them together) and exits 0 after the last, or 1 if
a permit expired before its line could be printed. A refusal never sleeps.
Use a permit when its line is printed:

  permitd reserve api --permits 3 --wait | tail -n +2 | while read -r _; do call_api; done

Exit status: 0 granted; 1 failure (server unreachable, limit not found, a
permit expired); 2 usage error or input the server rejected as invalid;
3 refused: no permit within --max-wait (nothing was reserved).
`, stdout, stderr)
	c.args("NAME")
	var cf clientFlags
	var permits int64
	var maxWait time.Duration
	var wait bool
	c.Int64(&permits, "permits", "N", 1, 1, 1<<62, "an integer >= 1", "permits to reserve")
	c.Duration(&maxWait, "max-wait", 0, durNonNegative, "the longest wait for the (first) permit that is acceptable")
	c.Bool(&wait, "wait", false, "print a line per permit when it may be used")
	cf.define(c)
	if ok, code := c.parse(args); !ok {
		return code
	}
	name := c.arg(0)
	if err := checkName("limit name", name); err != nil {
		return c.usageError(err.Error())
	}
	// One reserve per run: a request ID makes its retries exactly-once
	// without the extra round trip (and log entry) of opening a session.
	cl, ctx, cancel, err := cf.client(client.WithoutSessions())
	if err != nil {
		return c.usageError(err.Error())
	}
	defer cancel()
	g, err := cl.Reserve(ctx, name, permits, maxWait)
	if err != nil {
		return c.fail(exitCodeOf(err), err)
	}
	if !g.Granted {
		printLine(stdout, map[string]any{"granted": false, "retry_after_ns": g.RetryAfter.Nanoseconds(), "request_id": g.RequestID,
			"error": fmt.Sprintf("limit %q: no permit within max wait %v; retry after %v", name, maxWait, g.RetryAfter)})
		return exitRefused
	}
	printLine(stdout, map[string]any{"granted": true, "permits": g.Permits, "wait_ns": g.Delay.Nanoseconds(),
		"spacing_ns": g.Spacing.Nanoseconds(), "expires_in_ns": g.ExpiresIn.Nanoseconds(), "request_id": g.RequestID})
	if wait {
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
