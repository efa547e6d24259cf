package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// TestTinyRun runs the whole measurement at 200 keys with short
// throughput runs over both protocols: the keys are created and counted,
// every side decides reserves without errors, the restart replays
// entries logged after a snapshot and ends ready, and the table has the
// row.
func TestTinyRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := cluster.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"-permitd", bin, "-keys", "200", "-rounds", "1", "-duration", "200ms", "-warmup", "0s",
		"-concurrency", "4", "-fill-concurrency", "16", "-after-snapshot", "20", "-restart-timeout", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	rep, err := run(ctx, o, t.TempDir(), &progress)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Keys != 200 || r.FillPerSec <= 0 || maxMiB(r.Memory, false) <= 0 || maxMiB(r.Memory, true) < maxMiB(r.Memory, false) {
		t.Errorf("fill and memory: %+v", r)
	}
	if len(r.Sides) != 6 {
		t.Fatalf("%d throughput sides, want single, hot and random over binary and http", len(r.Sides))
	}
	for _, s := range r.Sides {
		if s.MedianRPS <= 0 || s.Errors != 0 || len(s.RPS) != 1 {
			t.Errorf("%s over %s: %+v; want reserves decided without errors", s.Side, s.Protocol, s)
		}
	}
	if r.SnapshotIndex == 0 || r.LastIndex <= r.SnapshotIndex || r.SnapshotBytes <= 0 {
		t.Errorf("snapshot at %d (%d bytes), last entry %d: want a snapshot and entries after it", r.SnapshotIndex, r.SnapshotBytes, r.LastIndex)
	}
	if r.StatusS <= 0 || r.ReplayS < r.StatusS || r.ReadyS <= 0 || len(r.MemoryAfterRestart) != 3 {
		t.Errorf("restart: status %.3f s, replay %.3f s, ready %.3f s, memory %+v", r.StatusS, r.ReplayS, r.ReadyS, r.MemoryAfterRestart)
	}
	var table strings.Builder
	printTable(&table, rep)
	if !strings.Contains(table.String(), "\n| 200 | ") || !strings.Contains(table.String(), "http reserves/s: single / hot / random") {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestOptionsAndMedian(t *testing.T) {
	for _, args := range [][]string{{"-keys", "0"}, {"-keys", "3000000"}, {"-keys", "1,x"}, {"-protocols", "grpc"}, {"-rounds", "0"}, {"-after-snapshot", "0"}, {"-fill-order", "backwards"}, {"extra"}} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q): no error", args)
		}
	}
	o, err := parseOptions([]string{"-keys", "10000, 1000000", "-protocols", "binary"}, io.Discard)
	if err != nil || len(o.keys) != 2 || o.keys[1] != 1_000_000 || len(o.protocols) != 1 {
		t.Errorf("parseOptions = %+v, %v", o, err)
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
}
