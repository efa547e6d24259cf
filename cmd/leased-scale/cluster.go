package main

import (
	"context"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// register is the three `permitd agent` processes the fleets talk to
// (package cluster starts and stops them).
type register = cluster.Cluster

// idleCores measures, over 10 s before any load (3 s read ±0.02 core from
// run to run), the cores the leader and
// the three agents together use: raft heartbeats and timers.
func idleCores(ctx context.Context, r *register) (leader, all float64, err error) {
	const idle = 10 * time.Second
	c0, err := r.CPUSeconds(r.LeaderPID())
	if err != nil {
		return 0, 0, err
	}
	a0, err := r.AllCPU()
	if err != nil {
		return 0, 0, err
	}
	if err := sleep(ctx, idle); err != nil {
		return 0, 0, err
	}
	c1, _ := r.CPUSeconds(r.LeaderPID())
	a1, _ := r.AllCPU()
	return (c1 - c0) / idle.Seconds(), (sum(a1) - sum(a0)) / idle.Seconds(), nil
}
