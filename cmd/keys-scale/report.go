package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/permitd/permitd/cmd/internal/cluster"
)

// report is a run's results: its settings and one result per key count.
type report struct {
	Started     string   `json:"started"`
	FillOrder   string   `json:"fill_order"`
	Concurrency int      `json:"concurrency"`
	Duration    string   `json:"duration"`
	Rounds      int      `json:"rounds"`
	Protocols   []string `json:"protocols"`
	Results     []result `json:"results"`
}

// result is one key count's measurements (times in seconds; a load is
// the one-minute load average when the phase ended, or began for a
// throughput run and the restart).
type result struct {
	Keys        int     `json:"keys"`
	FillSeconds float64 `json:"fill_s"`
	FillPerSec  float64 `json:"fill_keys_per_s"`
	FillLoad    float64 `json:"fill_load"`
	// Memory is each node's after the fill; MemoryAfterRestart after the
	// restart (VmHWM then is the restore's peak).
	Memory             []cluster.Memory `json:"memory"`
	MemoryLoad         float64          `json:"memory_load"`
	Sides              []sideResult     `json:"throughput"`
	SnapshotIndex      uint64           `json:"snapshot_index"`
	LastIndex          uint64           `json:"last_index_before_stop"`
	SnapshotBytes      int64            `json:"snapshot_bytes"`
	StatusS            float64          `json:"restart_status_s"`
	ReplayS            float64          `json:"restart_replay_s"`
	ReadyS             float64          `json:"restart_ready_s"`
	RestartLoad        float64          `json:"restart_load"`
	MemoryAfterRestart []cluster.Memory `json:"memory_after_restart"`
	Error              string           `json:"error,omitempty"`
}

// sideResult is one side's throughput runs over one protocol.
type sideResult struct {
	Side       string    `json:"side"`
	Protocol   string    `json:"protocol"`
	RPS        []float64 `json:"reserves_per_s"`
	P50Ms      []float64 `json:"p50_ms"`
	Load       []float64 `json:"load"`
	Errors     int64     `json:"errors"`
	FirstError string    `json:"first_error,omitempty"`
	// Elections counts the runs during which the term changed.
	Elections   int     `json:"runs_with_elections"`
	MedianRPS   float64 `json:"median_reserves_per_s"`
	MedianP50Ms float64 `json:"median_p50_ms"`
}

// maxMiB is the largest RSS (or VmHWM with hwm) among ms, in MiB.
func maxMiB(ms []cluster.Memory, hwm bool) float64 {
	var m int64
	for _, x := range ms {
		v := x.RSSBytes
		if hwm {
			v = x.HWMBytes
		}
		m = max(m, v)
	}
	return float64(m) / (1 << 20)
}

// printTable prints the results as one table: a row per key count.
func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "templated keys on a 3-node cluster, created in %s order; throughput: median of %d rounds, permitd bench on the leader, concurrency %d, %s each\n",
		rep.FillOrder, rep.Rounds, rep.Concurrency, rep.Duration)
	head := []string{"keys", "fill: keys/s", "largest node after it: RSS / HWM MiB", "snapshot MiB", "restart s: status / replay / ready", "after it: RSS / HWM MiB"}
	for _, p := range rep.Protocols {
		head = append(head, p+" reserves/s: single / hot / random")
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	for _, r := range rep.Results {
		row := []string{fmt.Sprint(r.Keys),
			fmt.Sprintf("%.0f (load %.1f)", r.FillPerSec, r.FillLoad),
			fmt.Sprintf("%.0f / %.0f (load %.1f)", maxMiB(r.Memory, false), maxMiB(r.Memory, true), r.MemoryLoad),
			fmt.Sprintf("%.1f", float64(r.SnapshotBytes)/(1<<20)),
			fmt.Sprintf("%.2f / %.2f / %.2f (load %.1f)", r.StatusS, r.ReplayS, r.ReadyS, r.RestartLoad),
			fmt.Sprintf("%.0f / %.0f", maxMiB(r.MemoryAfterRestart, false), maxMiB(r.MemoryAfterRestart, true))}
		for _, p := range rep.Protocols {
			var rps []string
			var load float64
			for _, s := range r.Sides {
				if s.Protocol == p {
					rps = append(rps, fmt.Sprintf("%.0f", s.MedianRPS))
					load = max(load, median(s.Load))
				}
			}
			row = append(row, fmt.Sprintf("%s (load %.1f)", strings.Join(rps, " / "), load))
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
		if r.Error != "" {
			fmt.Fprintf(w, "  %d keys: error: %s\n", r.Keys, r.Error)
		}
	}
}
