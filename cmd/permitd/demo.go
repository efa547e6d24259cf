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
	register("demo", "run a 3-node cluster in this process with clients, kill its leader once, then partition a group of leased workers", runDemo)
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("demo", "demo [flags]", `
Starts three register nodes in this process on loopback (temporary data
directories, removed at exit).

Scene 1 (--duration): creates a strict limit and runs clients that acquire
permits through different nodes. Prints one line per second: grants in that
second, the smallest gap between two permits, the mean wait and the leader.
After --kill-after it kills the leader (no graceful handover) to show
failover.

Scene 2 (--scene2-duration): makes a leased limit and runs six workers
(transport/worker, in this process) in three groups A, B and C, one caller each,
through the cluster's HTTP API. Group C's register access is cut for a
quarter of the scene: it spends its lease, steals from the others, then
fails closed; after it reconnects it is back to its share. Prints one line
per second with each group's permits/s and share, and checks the fleet
against the over-grant bound C + O + floor(W/I) + 1 (W = 1 s).

Scene 3 (--scene3-duration): eight workers call a fake LLM API that
answers 429 above 10 requests/s, 15000 tokens/s or 4 calls in flight. Each
call reserves all three on the register at once (a request, an estimate of
3000 tokens, an in-flight permit), waits for the grant, makes the call
(real cost 500..3000 tokens, known at its end), then settles the actual
tokens and releases the in-flight permit. Prints one line per second with
requests/s, tokens/s and calls in flight against each limit and the API's
429s, then totals and the fraction of the binding limit reached.

Ctrl-C stops it cleanly.

Exit status: 0 ok; 1 the demo failed (or the fleet broke the bound, or
the fake API answered a 429); 2 usage error.
`, stdout, stderr)
	var cfg demo.Config
	c.Duration(&cfg.Scene1.Duration, "duration", 15*time.Second, durPositive, "how long scene 1 runs (Ctrl-C stops earlier)")
	c.Float(&cfg.Scene1.Rate, "rate", "R", 10, "permits per second of the demo limit (strict spacing)").Check(func(x float64) bool { return x > 0 && x <= 1000 }, "a number > 0 and <= 1000")
	c.Int(&cfg.Scene1.Clients, "clients", "N", 6, "concurrent clients, spread over the three nodes").Range(1, 256, "an integer from 1 to 256")
	c.Duration(&cfg.Scene1.KillAfter, "kill-after", 5*time.Second, durNonNegative, "kill the leader after this long (0: never)")
	c.Bool(&cfg.Verbose, "verbose", false, "show the nodes' logs")
	c.Bool(&cfg.Secure, "secure", false, "run the cluster secured: raft over mutual TLS, the API over TLS, an admin token on every request (certificates and token made for the run)")
	var scene string
	c.Choice(&scene, "scene", "all", "which scenes to run: 1 (clients, leader kill), 2 (leased workers, a partitioned group), 3 (multi-limit reserves for a fake LLM API) or all", "1", "2", "3", "all")
	c.Duration(&cfg.Scene2.Duration, "scene2-duration", 15*time.Second, durPositive, "how long scene 2 runs; group C is cut off from the register from 1/4 to 1/2 of it").AtLeast(4 * time.Second)
	c.Float(&cfg.Scene2.Rate, "scene2-rate", "R", 300, "permits per second of scene 2's leased limit").Check(func(x float64) bool { return x >= 10 && x <= 100_000 }, "a number from 10 to 100000")
	c.Duration(&cfg.Scene3.Duration, "scene3-duration", demo.Scene3DefaultDuration, durPositive, "how long scene 3 runs").AtLeast(2 * time.Second)
	c.Int64(&cfg.Scene3.TokensPerSec, "scene3-tpm", "N", demo.Scene3DefaultTokensPerSec, "tokens per second of scene 3's llm-tpm limit (15000: tokens bind first; 40000: requests do)").Range(3000, 1_000_000, "an integer from 3000 to 1000000")
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
