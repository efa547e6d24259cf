package demo

import (
	"context"
	"fmt"
	"io"
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

// Scene2Config tunes scene 2: how long it runs (group C is cut off from
// 1/4 to 1/2 of it) and the leased limit's rate.
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
// on out, and stops the cluster. It returns when the scenes are done or
// ctx ends (then with no error); an error says why a scene could not run
// or what it found broken.
func Run(ctx context.Context, out io.Writer, cfg Config) error {
	c, err := startCluster(out, cfg.Verbose, cfg.Secure)
	if err != nil {
		return err
	}
	defer c.close()
	fmt.Fprintf(out, "permitd demo: 3 nodes on %s, %s, %s (HTTP)\n", c.nodes[0].httpAddr, c.nodes[1].httpAddr, c.nodes[2].httpAddr)
	if !c.awaitLeader(ctx) {
		return nil
	}
	if cfg.Scene == 0 || cfg.Scene == 1 {
		ctx1, cancel := context.WithTimeout(ctx, cfg.Scene1.Duration)
		err := scene1(ctx1, out, c, cfg.Scene1)
		cancel()
		if err != nil {
			return err
		}
	}
	if cfg.Scene == 1 || ctx.Err() != nil {
		return nil
	}
	env := c.env(ctx)
	if cfg.Scene == 0 || cfg.Scene == 2 {
		if err := runScene2(ctx, out, newScene2(cfg.Scene2, env)); err != nil {
			return err
		}
	}
	if (cfg.Scene != 0 && cfg.Scene != 3) || ctx.Err() != nil {
		return nil
	}
	return runScene3(ctx, out, scene3{Scene3Config: cfg.Scene3, workers: s3DefaultWorkers, sceneEnv: env})
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
