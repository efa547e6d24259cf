package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// TestLimitOptionsCoverAlgorithms: the views read every option limits put
// takes (a new option of algorithmOptions without a reader here fails).
func TestLimitOptionsCoverAlgorithms(t *testing.T) {
	for alg, opts := range algorithmOptions {
		for _, o := range opts {
			if limitOptions[o] == nil {
				t.Errorf("option --%s of %s: no reader in limitOptions", o, alg)
			}
		}
	}
}

// TestLimitsTable: limits list's table has one aligned row per limit with
// its rate as R/PER ("-" for concurrency), its algorithm's options as
// limits put takes them, leased and shadow; limits get's view lists the
// pool of a leased limit and the shadow counters of a shadow one.
func TestLimitsTable(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	dur := func(d time.Duration) *time.Duration { return &d }
	ls := []client.Limit{
		{Name: "api", LimitSpec: client.LimitSpec{Algorithm: "strict", Rate: 1, Per: 6 * time.Second, MaxReserved: i64(2), Expiry: dur(3 * time.Second)}, IntervalNanos: int64(6 * time.Second)},
		{Name: "fleet", LimitSpec: client.LimitSpec{Algorithm: "bursty", Rate: 100, Per: time.Second, MaxBurstSeconds: f64(2), Shadow: true}, Leased: true,
			LeasePool: &client.LimitLeasePolicy{BurstPermits: 100, MaxOutstandingPermits: 50, Leases: 3}, ShadowWouldRefuse: 7},
		{Name: "workers", LimitSpec: client.LimitSpec{Algorithm: "concurrency", MaxInFlight: i64(4), TTL: dur(time.Minute)}},
	}
	var b bytes.Buffer
	printLimitsTable(&b, ls)
	want := "" +
		"NAME     ALGORITHM    RATE    OPTIONS                   LEASED  SHADOW\n" +
		"api      strict       1/6s    max-reserved=2 expiry=3s  no      no\n" +
		"fleet    bursty       100/1s  max-burst-seconds=2       yes     yes\n" +
		"workers  concurrency  -       max-in-flight=4 ttl=1m    no      no\n"
	if b.String() != want {
		t.Errorf("limits list table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printLimitsTable(&b, nil)
	if !strings.Contains(b.String(), "no limits") {
		t.Errorf("empty table: %q", b.String())
	}
	b.Reset()
	printLimit(&b, ls[1])
	got := b.String()
	for _, line := range []string{"name:                    fleet", "rate:                    100/1s", "max_burst_seconds:       2",
		"leased:                  yes", "burst_permits:           100", "max_outstanding_permits: 50", "leases:                  3",
		"shadow_would_refuse:     7", "interval:                0s"} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("limits get view: no line %q in\n%s", line, got)
		}
	}
	b.Reset()
	printLimit(&b, ls[2])
	if got := b.String(); strings.Contains(got, "interval") || strings.Contains(got, "shadow_granted") || !strings.Contains(got, "ttl:              1m\n") {
		t.Errorf("concurrency limit's view:\n%s", got)
	}
}
