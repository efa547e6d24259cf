package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// sidecarAnswer is one reserve answered by a sidecar.
type sidecarAnswer struct {
	atNanos int64 // since the run's start, when the answer arrived
	group   int
	code    int
}

// TestBinaryWorkersRideOutLeaderKill: three agents and three `permitd
// worker` sidecars (groups A and B saturated by closed-loop callers, group
// C asking 30/s open loop) on a 200/s leased limit with C = 400 and O = 800
// permits and a 2 s lease TTL (renewals every second). The register's
// leader is killed with SIGKILL under that load, when a renewal is due or
// under way at every worker. A renewal keeps the unspent permits its
// worker may still spend (the in-flight allowance), and a caller waits
// for a renewal in flight instead of failing; so:
//
//   - no sidecar answers 503 (or anything but 200 and 429) at any time;
//   - the unsaturated group C is granted at least 99 % of its asks (after
//     the first 3 s, while the first leases settle), the election
//     included;
//   - the fleet stays within C + O + floor(W/I) + 1 over every window;
//
// and it reports the rate the fleet was granted from the kill until half
// a second after a new leader is up (not asserted, a rate on a loaded
// machine: 92-102 % of the limit in 11 of 11 runs since the workers'
// burst ratio is 1.5, 11 of 15 at 90 % or more at 1.1; 93-99 % in five
// runs since a new leader counts the election's time, node/receipt.go,
// one of five at 76 % on the build before; 65-97 % before that). The leader is killed once the fleet's shares have converged
// (95 % of the limit granted over the last second), after 6 s at the
// earliest and 14 s at the latest. PERMITD_BIN runs it against another
// build; it passes on the commit before the allowance (7cb4564) as well:
// see TestBinaryWorkersRideOutLeaderKillWithAGroupCut for why.
func TestBinaryWorkersRideOutLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		rate          = 200 // permits per second
		intervalNanos = int64(time.Second) / rate
		groupCRate    = 30 // group C's asks per second
		workerTTL     = "2s"
	)
	// PERMITD_LEADERKILL_WORKER_FLAGS replaces the workers' lease flags
	// (space separated), for measuring other settings by hand.
	workerFlags := []string{"--ttl", workerTTL}
	if v := os.Getenv("PERMITD_LEADERKILL_WORKER_FLAGS"); v != "" {
		workerFlags = strings.Fields(v)
	}
	// PERMITD_LEADERKILL_POOL ("C,O") replaces the pool's C and O (400
	// and 800 permits: two and four seconds of the rate).
	burst, maxOut := int64(400), int64(800)
	if v := os.Getenv("PERMITD_LEADERKILL_POOL"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d", &burst, &maxOut); err != nil || burst < 1 || maxOut < 1 {
			t.Fatalf("PERMITD_LEADERKILL_POOL=%q: want C,O (two positive integers)", v)
		}
	}
	bin := permitdUnderTest(t)
	agents, hc, leader := startLeasedRegister(t, bin, rate, burst, maxOut)

	ports := freePorts(t, 6)
	groups := []string{"A", "B", "C"}
	var sidecars []string
	var workers []*testAgent
	for i, g := range groups {
		gossip := fmt.Sprintf("127.0.0.1:%d", ports[i])
		sidecar := fmt.Sprintf("127.0.0.1:%d", ports[3+i])
		join := fmt.Sprintf("127.0.0.1:%d", ports[(i+1)%3])
		w := &testAgent{id: "worker-" + g}
		w.start(t, bin, nil, append([]string{"worker", "--group", g, "--name", "w" + g, "--limit", "lk", "--servers", serversOf(agents...),
			"--gossip-addr", gossip, "--join", join, "--http-addr", sidecar}, workerFlags...)...)
		workers = append(workers, w)
		sidecars = append(sidecars, sidecar)
	}
	superviseSidecars(t, hc, workers, sidecars)

	// The load: 4 closed-loop callers on A and on B, C open loop at 30/s.
	start := time.Now()
	since := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var answers []sidecarAnswer
	var asked [3]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	reserve := func(g int) {
		asked[g].Add(1)
		code, resp := doQuiet(hc, "POST", "http://"+sidecars[g]+"/v1/limits/lk/reserve",
			fmt.Sprintf(`{"permits":1,"max_wait":"1s","request_id":"lk-%d"}`, seq.Add(1)))
		mu.Lock()
		answers = append(answers, sidecarAnswer{since(), g, code})
		mu.Unlock()
		if code != 200 && code != 429 {
			t.Logf("sidecar %s (group %s) answered %d %s", sidecars[g], groups[g], code, strings.TrimSpace(string(resp)))
			time.Sleep(10 * time.Millisecond) // do not spin on a failing sidecar
		}
	}
	for g := range 2 {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						reserve(g)
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / groupCRate)
		defer tick.Stop()
		var inner sync.WaitGroup
		defer inner.Wait()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				inner.Add(1)
				go func() { defer inner.Done(); reserve(2) }()
			}
		}
	}()

	// Steady load for at least 6 s, until the shares have converged to
	// max-min (C 33/s with headroom, A and B 83.5/s each: the fleet
	// granted 95 % of the limit over the last second) or for 14 s, then
	// kill the leader: what the election costs is measured against a
	// fleet that was using the limit.
	grantedSince := func(from int64) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for i := len(answers) - 1; i >= 0 && answers[i].atNanos >= from; i-- {
			if answers[i].code == 200 {
				n++
			}
		}
		return n
	}
	var beforeKill int
	waitUntil(t, 20*time.Second, "6 s of steady load", func() bool {
		if time.Since(start) < 6*time.Second {
			return false
		}
		beforeKill = grantedSince(since() - int64(time.Second))
		return beforeKill >= rate*95/100 || time.Since(start) >= 14*time.Second
	})
	newLeader, killAt, readyAt := killLeader(t, hc, agents, leader, since)
	t.Logf("killed leader %s at %v (%d granted in the second before); %s leads %v later", leader, time.Duration(killAt), beforeKill, newLeader, time.Duration(readyAt-killAt))
	waitUntil(t, 15*time.Second, "4 s under the new leader", func() bool { return since() >= readyAt+int64(4*time.Second) })
	close(stop)
	wg.Wait()
	end := since()

	mu.Lock()
	defer mu.Unlock()
	var other, refused int
	var grantedIn [3]int64
	// Group C's asks and grants after the first 3 s (the first leases
	// and the shares settle meanwhile).
	const warmNanos = int64(3 * time.Second)
	var askedC, grantedC int64
	var grants []int64
	electionFrom, electionTo := killAt, readyAt+int64(500*time.Millisecond)
	var inElection int64
	for _, a := range answers {
		if a.group == 2 && a.atNanos >= warmNanos {
			askedC++
			if a.code == 200 {
				grantedC++
			}
		}
		switch a.code {
		case 200:
			grantedIn[a.group]++
			grants = append(grants, a.atNanos)
			if a.atNanos >= electionFrom && a.atNanos < electionTo {
				inElection++
			}
		case 429:
			refused++
		default:
			other++
		}
	}
	if other != 0 {
		t.Errorf("%d sidecar answers other than 200 and 429 (the fleet failed closed although a majority of the register lived)", other)
	}
	span := float64(electionTo-electionFrom) / 1e9
	if float64(grantedC) < 0.99*float64(askedC) {
		t.Errorf("the unsaturated group C was granted %d of its %d asks after the first 3 s, want at least 99%%", grantedC, askedC)
	}
	// The bound over every window of a few lengths (the answer times are
	// when the permits were handed out, give or take the loopback trip).
	for _, w := range []int64{int64(100 * time.Millisecond), int64(time.Second), int64(3 * time.Second), end} {
		worst, j := 0, 0
		for i := range grants {
			for grants[i]-grants[j] > w {
				j++
			}
			worst = max(worst, i-j+1)
		}
		if bound := burst + maxOut + w/intervalNanos + 1; int64(worst) > bound {
			t.Errorf("%d permits granted within %v, above the bound %d", worst, time.Duration(w), bound)
		}
	}
	// The answers of the 3 s after the kill, by code (issue 36 counted
	// these at --ttl 400ms and 2s: PERMITD_LEADERKILL_WORKER_FLAGS).
	after := map[int]int{}
	for _, a := range answers {
		if a.atNanos >= killAt && a.atNanos < killAt+int64(3*time.Second) {
			after[a.code]++
		}
	}
	t.Logf("the 3 s after the kill (workers %s): %d answered 200, %d 429, %d 503, %d other", strings.Join(workerFlags, " "),
		after[200], after[429], after[503], sumOther(after))
	var perSec [3][]int
	for _, a := range answers {
		sec := int(a.atNanos / int64(time.Second))
		for len(perSec[a.group]) <= sec {
			perSec[a.group] = append(perSec[a.group], 0)
		}
		if a.code == 200 {
			perSec[a.group][sec]++
		}
	}
	t.Logf("granted per second: A %v, B %v, C %v", perSec[0], perSec[1], perSec[2])
	// Reported, not asserted (a rate on a loaded machine): what the fleet
	// got across the election.
	t.Logf("granted A %d, B %d, C %d (after 3 s: %d of %d asked, %.2f%%); %d refused (429), %d other; %.0f permits/s from the kill to 0.5 s after the new leader (%.2f s), %.0f/s over the run",
		grantedIn[0], grantedIn[1], grantedIn[2], grantedC, askedC, 100*float64(grantedC)/float64(max(1, askedC)),
		refused, other, float64(inElection)/span, span, float64(len(grants))/(float64(end)/1e9))
}

// sumOther sums the counts of the codes other than 200, 429 and 503.
func sumOther(byCode map[int]int) int {
	n := 0
	for code, k := range byCode {
		if code != 200 && code != 429 && code != 503 {
			n += k
		}
	}
	return n
}

// superviseSidecars kills the sidecar processes when the test ends
// (printing their logs if it failed) and waits until every sidecar is
// ready.
func superviseSidecars(t *testing.T, hc *http.Client, workers []*testAgent, sidecars []string) {
	t.Helper()
	t.Cleanup(func() {
		for _, w := range workers {
			w.signal(t, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, w := range workers {
				t.Logf("--- %s log:\n%s", w.id, w.log.String())
			}
		}
	})
	for _, s := range sidecars {
		waitUntil(t, 10*time.Second, "sidecar "+s+" ready", func() bool {
			code, _ := doQuiet(hc, "GET", "http://"+s+"/readyz", "")
			return code == 200
		})
	}
}
