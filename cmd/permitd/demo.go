package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/permitd/permitd/cmd/internal/demo"
)

func init() {
	register("demo", "run a 3-node cluster in this process: a leader crash, a group cut off, a fake LLM API", runDemo)
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("demo", "demo [flags]", `
Starts three register nodes in this process on loopback (temporary data
directories, removed at exit) and runs three scenes. Each scene first says
what it does and what it proves, prints one line per second with every
number against its bound, then its checks (the measured value, the bound's
formula and its values) and a verdict: PASS or FAIL. A summary ends the
run. All three take about 35 s.

Scene 1 (--duration): clients use permits of a strict limit (--rate, one
permit per interval, each to be used within its expiry, a tenth of the
interval) through different nodes; after --kill-after the leader is
killed (no graceful handover). Checks: the smallest gap between any two
permits used is at least interval - expiry, no sliding 1 s window holds
more than floor((1 s + expiry)/interval) + 1, and permits resume after
the crash.

Scene 2 (--scene2-duration): six workers (transport/worker, in this
process) in groups A, B and X, one caller each, lease permits of a leased
limit (--scene2-rate) through the cluster's HTTP API. Group X is cut off
from the cluster from 1/4 to 3/4 of the scene: it spends what it holds,
borrows from the others, then fails closed; reconnected, it leases again.
Checks: the fleet never spends more than C + O + floor(W/I) + 1 in any
sliding 1 s window W (C: the pool's burst, O: the most permits the workers hold
at once, I: the interval), group X spends nothing once its last lease and
borrowed permits have expired, and spends again after reconnecting.

Scene 3 (--scene3-duration): eight workers call a fake LLM API that
answers 429 above 10 requests/s, --scene3-tokens-per-sec tokens/s or 4
calls at once. Each call reserves all three on the cluster at once (a
request, an estimate of 3000 tokens, a call slot), waits for the grant,
makes the call (real cost 500..3000 tokens, known at its end), then
settles the actual tokens and releases the slot. Checks: no 429, and the
API's busiest 1 s of requests and tokens within the limits' bounds.

Ctrl-C stops it cleanly.

Exit status: 0 no scene failed (a scene Ctrl-C stopped early is not
judged, unless a bound it measured was broken); 1 a scene failed (its
checks say why) or the demo could not run; 2 usage error.
`, stdout, stderr)
	var cfg demo.Config
	c.Duration(&cfg.Scene1.Duration, "duration", 10*time.Second, durPositive, "how long scene 1 runs (Ctrl-C stops earlier)")
	c.Float(&cfg.Scene1.Rate, "rate", "R", 10, "permits per second of scene 1's strict limit").Check(func(x float64) bool { return x > 0 && x <= 1000 }, "a number > 0 and <= 1000")
	c.Int(&cfg.Scene1.Clients, "clients", "N", 6, "scene 1's concurrent clients, spread over the three nodes").Range(1, 256, "an integer from 1 to 256")
	c.Duration(&cfg.Scene1.KillAfter, "kill-after", 4*time.Second, durNonNegative, "kill scene 1's leader after this long (0: never)")
	c.Bool(&cfg.Verbose, "verbose", false, "show the nodes' logs")
	c.Bool(&cfg.Secure, "secure", false, "run the cluster secured: raft over mutual TLS, the API over TLS, an admin token on every request (certificates and token made for the run)")
	var scene string
	c.Choice(&scene, "scene", "all", "which scenes to run: 1 (clients, leader kill), 2 (leased workers, a group cut off), 3 (one reserve for three limits of a fake LLM API) or all", "1", "2", "3", "all")
	c.Duration(&cfg.Scene2.Duration, "scene2-duration", 12*time.Second, durPositive, "how long scene 2 runs (at least 8s: group X, cut off from the cluster from 1/4 to 3/4 of it, must have time to fail closed and recover)").AtLeast(8 * time.Second)
	c.Float(&cfg.Scene2.Rate, "scene2-rate", "R", 300, "permits per second of scene 2's leased limit").Check(func(x float64) bool { return x >= 10 && x <= 100_000 }, "a number from 10 to 100000")
	c.Duration(&cfg.Scene3.Duration, "scene3-duration", demo.Scene3DefaultDuration, durPositive, "how long scene 3 runs (at least 2s)").AtLeast(2 * time.Second)
	c.Int64(&cfg.Scene3.TokensPerSec, "scene3-tokens-per-sec", "N", demo.Scene3DefaultTokensPerSec, "tokens per second of scene 3's llm-tpm limit and of the fake API (15000: tokens run out before requests; 40000: requests do)").Range(3000, 1_000_000, "an integer from 3000 to 1000000")
	// The flag's old name, which took tokens per second too: still
	// accepted, not listed.
	c.fs.Var(c.fs.Lookup("scene3-tokens-per-sec").Value, "scene3-tpm", "old name of --scene3-tokens-per-sec")
	c.Float(&cfg.Scene3.BurstSeconds, "scene3-burst", "S", demo.Scene3DefaultBurstSeconds, "seconds of llm-tpm's rate its bursty store holds: the most a window holds beyond the rate, and the room for refunds of estimates crossing each grant").Check(func(x float64) bool { return x >= 0 && x <= 60 }, "a number of seconds from 0 to 60")
	if ok, code := c.parse(args); !ok {
		return code
	}
	cfg.Scene = map[string]int{"1": 1, "2": 2, "3": 3, "all": 0}[scene]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, stdout, cfg); err != nil {
		return c.fail(exitFailure, err)
	}
	return 0
}
