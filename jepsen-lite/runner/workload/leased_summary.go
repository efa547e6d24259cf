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
	// Relays are the lease relays some workers send their lease
	// commands through.
	Relays []LeasedRelayReport `json:"relays,omitempty"`
}

// LeasedWorkerReport is one sidecar in the summary.
type LeasedWorkerReport struct {
	Name       string `json:"name"`
	Group      string `json:"group"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
	Log        string `json:"log"`
	Restarts   int    `json:"restarts"`
	// Relay is the relay it sends its lease commands through first (""
	// the register directly).
	Relay string `json:"relay,omitempty"`
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
		if s.relay != nil {
			rep.Relay = s.relay.Name
		}
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
	out.Relays = f.relayReports()
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

// Logs returns the sidecars' and the relays' logs for the logs checker.
func (f *Fleet) Logs() ([]checker.Log, []string) {
	var paths []string
	for _, s := range f.sidecars {
		paths = append(paths, s.LogPath)
	}
	for _, rp := range f.relays {
		paths = append(paths, rp.LogPath)
	}
	var logs []checker.Log
	var errs []string
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		logs = append(logs, checker.Log{Name: "workers/" + filepath.Base(path), Text: string(b)})
	}
	return logs, errs
}
