package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Config is what the demo runs (permitd demo's flags): which scenes,
// how, and the tuning of each.
type Config struct {
	// Scene is the one scene to run (1, 2 or 3), or 0 for all of them in
	// turn.
	Scene int
	// Verbose shows the nodes' logs; Secure runs the cluster secured
	// (secure.go).
	Verbose, Secure bool
	Scene1          Scene1Config
	Scene2          Scene2Config
	Scene3          Scene3Config
}

// Scene1Config tunes scene 1: how long it runs, the strict limit's rate,
// the clients, and when the leader is killed (0: never).
type Scene1Config struct {
	Duration  time.Duration
	Rate      float64
	Clients   int
	KillAfter time.Duration
}

// Scene2Config tunes scene 2: how long it runs (its last group is cut
// off from the register from 1/4 to 3/4 of it) and the leased limit's
// rate.
type Scene2Config struct {
	Duration time.Duration
	Rate     float64
}

// Scene3Config tunes scene 3: how long it runs, and llm-tpm's rate and
// burst.
type Scene3Config struct {
	Duration     time.Duration
	TokensPerSec int64
	BurstSeconds float64
}

// Run starts the cluster, runs the scenes cfg names in turn, printing
// on out what each does and proves, its checks and its verdict, then a
// summary, and stops the cluster. It returns when the scenes are done or
// ctx ends (the scenes not run are then named in the summary); an error
// says that the cluster could not start, or which scenes failed.
func Run(ctx context.Context, out io.Writer, cfg Config) error {
	began := time.Now()
	scenes := []struct {
		n     int
		title string
		d     time.Duration
		what  string
	}{
		{1, scene1Title, cfg.Scene1.Duration, "clients share a strict limit while its leader node is killed: permits stay spaced"},
		{2, scene2Title, cfg.Scene2.Duration, "workers lease permits and one group loses the cluster: the fleet stays within its bound"},
		{3, scene3Title, cfg.Scene3.Duration, "each call reserves requests, tokens and a call slot at once: the API never answers 429"},
	}
	var total time.Duration
	var list strings.Builder
	for _, s := range scenes {
		if cfg.Scene == 0 || cfg.Scene == s.n {
			total += s.d
			fmt.Fprintf(&list, "  scene %d (%s): %s\n", s.n, sec(s.d), s.what)
		}
	}
	fmt.Fprintf(out, "%s\n%sIt takes about %s; Ctrl-C stops it.\n\n",
		wrap("permitd demo: a 3-node permitd cluster runs inside this process (on 127.0.0.1; its data in temporary folders, removed at exit). "+
			"Each scene checks a promise against the bound its limit's settings give, and ends with PASS or FAIL:", 100),
		list.String(), sec((total + 3*time.Second).Round(5*time.Second)))
	c, err := startCluster(out, cfg.Verbose, cfg.Secure)
	if err != nil {
		return err
	}
	defer c.close()
	fmt.Fprintf(out, "nodes n1, n2, n3: HTTP on %s, %s, %s\n", c.nodes[0].httpAddr, c.nodes[1].httpAddr, c.nodes[2].httpAddr)
	fmt.Fprint(out, "electing a leader... ")
	if !c.awaitLeader(ctx) {
		fmt.Fprintln(out, "stopped")
		return nil
	}
	l, _ := c.leader()
	fmt.Fprintf(out, "%s leads (after %s)\n", l.id, secs(time.Since(began)))
	var results []sceneResult
	run := func(r sceneResult) {
		r.stopped = ctx.Err() != nil
		r.print(out)
		results = append(results, r)
	}
	if cfg.Scene == 0 || cfg.Scene == 1 {
		ctx1, cancel := context.WithTimeout(ctx, cfg.Scene1.Duration)
		run(scene1(ctx1, out, c, cfg.Scene1))
		cancel()
	}
	if cfg.Scene == 0 || cfg.Scene == 2 {
		if ctx.Err() == nil {
			run(runScene2(ctx, out, newScene2(cfg.Scene2, c.env(ctx))))
		}
	}
	if cfg.Scene == 0 || cfg.Scene == 3 {
		if ctx.Err() == nil {
			run(runScene3(ctx, out, scene3{Scene3Config: cfg.Scene3, workers: s3DefaultWorkers, sceneEnv: c.env(ctx)}))
		}
	}
	return summary(out, results, ctx.Err() != nil, time.Since(began))
}

// summary prints every scene's verdict and returns an error naming the
// scenes that failed (nil if none did).
func summary(out io.Writer, results []sceneResult, interrupted bool, took time.Duration) error {
	fmt.Fprintln(out, "\n=== summary ===")
	var failed []string
	passed := 0
	for _, r := range results {
		fmt.Fprintln(out, r.verdict())
		switch {
		case len(r.failed()) > 0:
			failed = append(failed, fmt.Sprintf("scene %d", r.n))
		case !r.stopped:
			passed++
		}
	}
	stopped := ""
	if interrupted {
		stopped = "; stopped by Ctrl-C, the scenes not listed did not run"
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "%d of %d scenes FAILED in %s%s\n", len(failed), len(results), secs(took), stopped)
		return fmt.Errorf("demo: %s failed (see its checks above)", strings.Join(failed, ", "))
	}
	fmt.Fprintf(out, "%d of %d scenes passed in %s%s\n", passed, len(results), secs(took), stopped)
	return nil
}

// mostInWindow is the most of times (sorted) that fall in any window of
// length w.
func mostInWindow(times []time.Time, w time.Duration) int {
	most, j := 0, 0
	for i := range times {
		for times[i].Sub(times[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}
