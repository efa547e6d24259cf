package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLeasedConfigDefaults(t *testing.T) {
	c, err := Config{OutDir: "x", Workload: WorkloadLeased, Workers: 6, Groups: 3}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != 20*time.Millisecond || c.MaxWait != 50*time.Millisecond ||
		c.Leased.TTL != time.Second || c.Leased.BurstPermits != 50 || c.Leased.MaxOutstandingPermits != 50 {
		t.Fatalf("leased defaults: %+v", c)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"max wait past the use delay", func(c *Config) { c.MaxWait = time.Second }, "leased max wait"},
		{"ttl", func(c *Config) { c.Leased.TTL = time.Hour }, "lease ttl"},
		{"margin", func(c *Config) { c.Leased.Margin = 600 * time.Millisecond }, "lease margin"},
		{"outstanding", func(c *Config) { c.Leased.MaxOutstandingPermits = -1 }, "max_outstanding_permits -1"},
	}
	for _, tt := range tests {
		c := Config{OutDir: "x", Workload: WorkloadLeased}
		tt.change(&c)
		_, err := c.withDefaults()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}

// TestLeasedBoundAndWindows: the limit's bound is the README's
// C + O + floor(W/I) + 1 and is checked over 1 s, 5 s and 10 s.
func TestLeasedBoundAndWindows(t *testing.T) {
	li := limitInfo{IntervalNanos: int64(20 * time.Millisecond), BurstPermits: 50, MaxOutstandingPermits: 40}
	b, err := li.bound(WorkloadLeased)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Max(int64(time.Second)); got != 50+40+50+1 {
		t.Fatalf("Max(1s) = %d, want 141 (%s)", got, b.Formula)
	}
	if got, want := leasedWindows(li), []int64{int64(time.Second), int64(5 * time.Second), int64(10 * time.Second)}; !slices.Equal(got, want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
	if got := recoveryWindow(WorkloadLeased, li); got != int64(time.Second) {
		t.Fatalf("recovery window %d, want 1s", got)
	}
}

// TestLeasedGenerateDrawsWorkerFaults: Generate draws every worker fault
// variant when the kind is listed.
func TestLeasedGenerateDrawsWorkerFaults(t *testing.T) {
	cfg, err := Config{OutDir: t.TempDir(), Workload: WorkloadLeased, Workers: 6, Groups: 3, Nemeses: []NemesisSpec{{Kind: FaultWorker}}, Duration: 10 * time.Minute}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, ev := range Generate(cfg) {
		kinds[ev.Name()] = true
	}
	for _, want := range []string{"worker:isolate-group", "worker:pause", "worker:kill"} {
		if !kinds[want] {
			t.Errorf("Generate never drew %s: %v", want, kinds)
		}
	}
}

func TestLeasedReportSection(t *testing.T) {
	if got := renderLeasedHTML(nil); got != "" {
		t.Fatalf("no fleet: %q", got)
	}
	l := &LeasedSummary{Formula: "C+O+floor(W/I)+1 with I=20000000ns C=50 O=50", FailClosed: 3, FailClosedExample: "g3-w2: 503 <fails closed>",
		Workers: []LeasedWorkerReport{{Name: "g1-w0", Group: "g1", Grants: 7, Log: "workers/g1-w0.log"}}}
	l.Workers[0].Last.Spent = 7
	l.Fleet.Spent = 7
	got := renderLeasedHTML(l)
	for _, want := range []string{"Worker sidecars", "C+O+floor(W/I)+1", "&lt;fails closed&gt;", "<td>g1-w0</td>", "<td>fleet</td>", "workers/g1-w0.log"} {
		if !strings.Contains(got, want) {
			t.Errorf("report section lacks %q:\n%s", want, got)
		}
	}
}
