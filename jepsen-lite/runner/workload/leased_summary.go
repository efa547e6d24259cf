package workload

import (
	"os"
	"path/filepath"

	"github.com/permitd/permitd/jepsen-lite/checker"
)

// LeasedSummary is the leased workload's part of the summary.
type LeasedSummary struct {
	// TTL, Margin, C and O are the lease settings (Margin 0: the
	// worker's default).
	TTLNanos              int64 `json:"ttl_ns"`
	MarginNanos           int64 `json:"margin_ns"`
	BurstPermits          int64 `json:"burst_permits"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	// Formula is the bound judged at the fake API.
	Formula string `json:"formula"`
	// FailClosed counts 503 answers (the sidecar failed closed);
	// FailClosedExample is one of them.
	FailClosed        int64  `json:"fail_closed"`
	FailClosedExample string `json:"fail_closed_example,omitempty"`
	// Fleet sums every process's last counters.
	Fleet   checker.WorkerCounters `json:"fleet"`
	Workers []LeasedWorkerReport   `json:"workers"`
}

// LeasedWorkerReport is one sidecar in the summary.
type LeasedWorkerReport struct {
	Name       string `json:"name"`
	Group      string `json:"group"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
	Log        string `json:"log"`
	Restarts   int    `json:"restarts"`
	// Last is the sum of every process's last read counters.
	Last checker.WorkerCounters `json:"last"`
	// Grants are the 200 answers the runner received from it.
	Grants int `json:"grants"`
}

// Summary reports the fleet; c and o are the lease policy, formula the
// bound judged at the fake API.
func (f *Fleet) Summary(c, o int64, formula string) *LeasedSummary {
	out := &LeasedSummary{
		TTLNanos: int64(f.cfg.Leased.TTL), MarginNanos: int64(f.cfg.Leased.Margin),
		BurstPermits: c, MaxOutstandingPermits: o, Formula: formula,
		FailClosed: f.failClosed.Load(),
	}
	out.FailClosedExample, _ = f.failClosedMsg.Load().(string)
	for _, s := range f.sidecars {
		rep := LeasedWorkerReport{Name: s.Name, Group: s.Group, HTTPAddr: s.HTTPAddr, GossipAddr: s.GossipAddr,
			Log: filepath.Join("workers", s.Name+".log"), Restarts: s.proc.Restarts()}
		s.mu.Lock()
		for _, inc := range s.incs {
			rep.Grants += len(inc.GrantNanos)
			if n := len(inc.Snapshots); n > 0 {
				rep.Last.Add(inc.Snapshots[n-1].WorkerCounters)
			}
		}
		s.mu.Unlock()
		out.Fleet.Add(rep.Last)
		out.Workers = append(out.Workers, rep)
	}
	return out
}

// Observations are the sidecars' incarnations for the checker.
func (f *Fleet) Observations() *checker.LeasedInput {
	in := &checker.LeasedInput{}
	for _, s := range f.sidecars {
		s.mu.Lock()
		for _, inc := range s.incs {
			c := *inc
			c.Snapshots = append([]checker.WorkerSnapshot(nil), inc.Snapshots...)
			c.GrantNanos = append([]int64(nil), inc.GrantNanos...)
			in.Incarnations = append(in.Incarnations, c)
		}
		s.mu.Unlock()
	}
	return in
}

// Logs returns the sidecars' logs for the logs checker.
func (f *Fleet) Logs() ([]checker.Log, []string) {
	var logs []checker.Log
	var errs []string
	for _, s := range f.sidecars {
		b, err := os.ReadFile(s.LogPath)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		logs = append(logs, checker.Log{Name: "workers/" + s.Name + ".log", Text: string(b)})
	}
	return logs, errs
}
