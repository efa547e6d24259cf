package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"net/http"
)

// TestMeasureGapsThroughLeaderKill is a measurement, not a test: it runs
// only with PERMITD_MEASURE_GAPS=N (N runs). Each run starts three agents
// (PERMITD_BIN, or a build of this package without -race), puts a strict
// limit of one permit per 100 ms, drives it with 16 HTTP clients reserving
// through random nodes (max_wait 2 s, a request ID, retried on 503), kills
// the leader with kill -9 after 3 s, and keeps going for 3 s. A client
// uses a permit at receipt + wait_ns, and only if it has not expired by
// then, counting expires_in_ns from the send (the Go client's rule). It
// reports the gaps between consecutive uses: over the whole run, and for
// uses within 0.1 s and 1 s after the kill.
func TestMeasureGapsThroughLeaderKill(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("PERMITD_MEASURE_GAPS"))
	if runs <= 0 {
		t.Skip("a measurement: set PERMITD_MEASURE_GAPS=runs")
	}
	bin := os.Getenv("PERMITD_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "permitd")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	var all, kill100, kill1s []float64
	for r := range runs {
		m := measureGapsOnce(t, bin, uint64(r))
		t.Logf("run %d: %d uses; gaps ms: min %.1f, median %.1f; after the kill: min within 0.1 s %.1f, within 1 s %.1f; the smallest gap's uses had round trips of %.1f and %.1f ms",
			r, m.uses, m.gaps[0], m.gaps[len(m.gaps)/2], m.minKill100ms, m.minKill1s, m.minGapRTTs[0], m.minGapRTTs[1])
		all = append(all, m.gaps...)
		kill100 = append(kill100, m.minKill100ms)
		kill1s = append(kill1s, m.minKill1s)
	}
	slices.Sort(all)
	t.Logf("over %d runs, %d gaps (ms): min %.1f, p1 %.1f, p5 %.1f, median %.1f; min within 0.1 s after the kill per run %v, within 1 s %v",
		runs, len(all), all[0], all[len(all)/100], all[len(all)/20], all[len(all)/2], kill100, kill1s)
}

// gapStats are the gaps of one run, in milliseconds.
type gapStats struct {
	uses int
	// gaps are sorted.
	gaps                    []float64
	minKill100ms, minKill1s float64
	// minGapRTTs are the round trips of the reserves of the two uses
	// closest together: a use is late by at most its answer's one-way
	// delay (and the client's own scheduling).
	minGapRTTs [2]float64
}

func measureGapsOnce(t *testing.T, bin string, seed uint64) gapStats {
	const interval = 100 * time.Millisecond
	agents := newTestAgents(t, 3)
	ids, httpAddr, byID := indexAgents(agents)
	for _, a := range agents {
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents))
	}
	defer func() {
		for _, a := range agents {
			a.signal(t, syscall.SIGKILL)
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	leader := waitLeader(t, hc, httpAddr, ids)
	body := fmt.Sprintf(`{"algorithm":"strict","rate":1,"per":"%s","max_reserved":16}`, interval)
	if code, resp := do(t, hc, "PUT", "http://"+httpAddr[leader]+"/v1/limits/gaps", body); code != 200 && code != 201 {
		t.Fatalf("put limit: %d %s", code, resp)
	}
	var mu sync.Mutex
	type usedAt struct {
		at  time.Time
		rtt time.Duration
	}
	var uses []usedAt
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ctx.Err() == nil; i++ {
				reqID := fmt.Sprintf("g%d-%d-%d", seed, w, i)
				for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
					node := ids[rng.IntN(len(ids))]
					code, resp, sent, recv := timedReserve(hc, httpAddr[node], "gaps", "2s", reqID)
					if code == 200 {
						var a struct {
							WaitNs    int64 `json:"wait_ns"`
							ExpiresNs int64 `json:"expires_in_ns"`
						}
						if json.Unmarshal(resp, &a) != nil {
							return
						}
						use := recv.Add(time.Duration(a.WaitNs))
						time.Sleep(time.Until(use))
						now := time.Now()
						if a.ExpiresNs > 0 && now.After(sent.Add(time.Duration(a.ExpiresNs))) {
							break // expired: not used
						}
						mu.Lock()
						uses = append(uses, usedAt{now, recv.Sub(sent)})
						mu.Unlock()
						break
					}
					if code == 429 || code == 400 || code == 404 {
						break
					}
				}
			}
		}()
	}
	// About 3 s of uses at the full rate, then the kill.
	waitUntil(t, 20*time.Second, "30 uses", func() bool { mu.Lock(); defer mu.Unlock(); return len(uses) >= 30 })
	killAt := time.Now()
	byID[leader].signal(t, syscall.SIGKILL)
	time.Sleep(3 * time.Second)
	cancel()
	wg.Wait()

	slices.SortFunc(uses, func(a, b usedAt) int { return a.at.Compare(b.at) })
	st := gapStats{uses: len(uses), minKill100ms: -1, minKill1s: -1}
	best := -1.0
	for i := 1; i < len(uses); i++ {
		g := float64(uses[i].at.Sub(uses[i-1].at)) / 1e6
		st.gaps = append(st.gaps, g)
		if best < 0 || g < best {
			best = g
			st.minGapRTTs = [2]float64{float64(uses[i-1].rtt) / 1e6, float64(uses[i].rtt) / 1e6}
		}
		since := uses[i].at.Sub(killAt)
		if since >= 0 && since <= 100*time.Millisecond && (st.minKill100ms < 0 || g < st.minKill100ms) {
			st.minKill100ms = g
		}
		if since >= 0 && since <= time.Second && (st.minKill1s < 0 || g < st.minKill1s) {
			st.minKill1s = g
		}
	}
	if len(st.gaps) == 0 {
		t.Fatalf("no uses")
	}
	slices.Sort(st.gaps)
	return st
}
