package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"--help"}, 0, "Exit status"},
		{"help lists secure", []string{"--help"}, 0, "-secure"},
		{"secure still validates", []string{"--secure", "--duration", "5s", "--out", out}, 2, "duration 5s"},
		{"leased lease ttl", []string{"--workload", "leased", "--lease-ttl", "1h", "--out", out}, 2, "lease ttl"},
		{"worker faults outside leased", []string{"--nemesis", "worker", "--out", out}, 2, "applies only to the leased workload"},
		{"bad nemesis", []string{"--nemesis", "flood", "--out", out}, 2, "allowed kinds"},
		{"bad size", []string{"--nodes", "4", "--out", out}, 2, "3 or 5"},
		{"stray argument", []string{"now"}, 2, "unexpected arguments"},
		{"sweep help", []string{"sweep", "--help"}, 0, "--nemesis partition,kill,pause,clock,loss,snapshot,transfer,reconfig,worker,relay"},
		{"sweep without seeds", []string{"sweep", "--out", out}, 2, "no seeds"},
		{"sweep bad seeds", []string{"sweep", "--seeds", "9-3", "--out", out}, 2, "N <= M"},
		{"sweep bad workload", []string{"sweep", "--seeds", "1", "--workloads", "bursty", "--out", out}, 2, "allowed: strict, window, leased, multi"},
		{"sweep over its bound", []string{"sweep", "--seeds", "1-300", "--max-runs", "1000", "--out", out}, 2, "1500 runs; at most 1000"},
		{"sweep runs the runner's checks", []string{"sweep", "--seeds", "1", "--duration", "5s", "--out", out}, 2, "duration 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.want) {
				t.Fatalf("exit %d, output %q; want %d containing %q", code, stdout.String()+stderr.String(), tt.code, tt.want)
			}
		})
	}
}
