package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
	"github.com/permitd/permitd/transport/client"
)

// The template's prefix, the single explicit limit, and the one spec
// both are made with: bench's default (strict, 1e9/s: the register is
// measured, not the limit; an hour's expiry, see bench's limitBody).
const (
	prefix      = "ks"
	singleLimit = "ks-single"
)

func limitSpec() client.LimitSpec {
	maxReserved, expiry := int64(1_000_000), time.Hour
	return client.LimitSpec{Algorithm: "strict", Rate: 1e9, Per: time.Second, MaxReserved: &maxReserved, Expiry: &expiry}
}

// keyName is key i of the template.
func keyName(i int) string { return prefix + ":k" + strconv.Itoa(i) }

// measure runs one key count on a fresh cluster under dir.
func measure(ctx context.Context, o options, bin, tmp string, n int, progress io.Writer) (res result, err error) {
	res.Keys = n
	dir, err := os.MkdirTemp(tmp, fmt.Sprintf("k%d-", n))
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	c, err := cluster.Start(ctx, bin, dir, "--test-hooks")
	if err != nil {
		return res, err
	}
	defer c.Stop()
	cl := c.Client
	if _, err := cl.PutTemplate(ctx, prefix, client.TemplateSpec{LimitSpec: limitSpec(), Idle: o.idle, MaxKeys: int64(n)}); err != nil {
		return res, fmt.Errorf("put template: %w", err)
	}
	if _, err := cl.PutLimit(ctx, singleLimit, limitSpec()); err != nil {
		return res, fmt.Errorf("put limit: %w", err)
	}
	logf(progress, "%d keys: filling", n)
	if err := fill(ctx, o, c, n, &res, progress); err != nil {
		return res, err
	}
	if res.Memory, err = memory(c); err != nil {
		return res, err
	}
	res.MemoryLoad = cluster.LoadAvg()
	logf(progress, "%d keys: filled in %.1f s; largest RSS %.0f MiB", n, res.FillSeconds, maxMiB(res.Memory, false))
	if res.Sides, err = throughput(ctx, o, bin, c, n, progress); err != nil {
		return res, err
	}
	if err := restart(ctx, o, c, n, &res, progress); err != nil {
		return res, err
	}
	res.MemoryAfterRestart, err = memory(c)
	return res, err
}

// fill creates the n keys: one reserve each, in o.fillOrder,
// o.fillConcurrency at once over the binary protocol; then the template
// must have n live keys.
func fill(ctx context.Context, o options, c *cluster.Cluster, n int, res *result, progress io.Writer) error {
	cl, err := client.New(c.LeaderFirst(), client.WithBinaryReserves(4))
	if err != nil {
		return err
	}
	defer cl.Close()
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if o.fillOrder == "random" {
		rand.New(rand.NewPCG(41, uint64(n))).Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	start := time.Now()
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	stopProgress := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopProgress:
				return
			case <-time.After(10 * time.Second):
				d := done.Load()
				logf(progress, "%d keys: %d created, %.0f/s", n, d, float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	for range min(o.fillConcurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				g, err := cl.Reserve(ctx, keyName(order[i]), 1, 0)
				if err == nil && !g.Granted {
					err = fmt.Errorf("reserve %s refused", keyName(order[i]))
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	res.FillSeconds = time.Since(start).Seconds()
	res.FillLoad = cluster.LoadAvg()
	if firstErr != nil {
		return fmt.Errorf("fill: %w", firstErr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("fill: %d of %d keys: %w", done.Load(), n, ctx.Err())
	}
	res.FillPerSec = float64(n) / res.FillSeconds
	return checkLiveKeys(ctx, c.Client, n)
}

// checkLiveKeys fails unless the template has n live keys.
func checkLiveKeys(ctx context.Context, cl *client.Client, n int) error {
	t, err := cl.GetTemplate(ctx, prefix)
	if err != nil {
		return fmt.Errorf("get template: %w", err)
	}
	if t.LiveKeys != int64(n) {
		return fmt.Errorf("template %s has %d live keys, want %d", prefix, t.LiveKeys, n)
	}
	return nil
}

// memory reads every agent's resident memory.
func memory(c *cluster.Cluster) ([]cluster.Memory, error) {
	var out []cluster.Memory
	for _, p := range c.Procs {
		m, err := cluster.MemoryOf(p.Process.Pid)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// sides are the three throughput runs: the explicit limit, the hot key,
// a random key among n (bench's flags after --limit).
func sides(n int) []struct {
	name string
	args []string
} {
	return []struct {
		name string
		args []string
	}{
		{"single", []string{"--limit", singleLimit}},
		{"hot", []string{"--limit", prefix, "--keys", "1"}},
		{"random", []string{"--limit", prefix, "--keys", strconv.Itoa(n)}},
	}
}

// throughput runs permitd bench on the leader: o.rounds rounds, each
// every side over every protocol in turn, and keeps each run.
func throughput(ctx context.Context, o options, bin string, c *cluster.Cluster, n int, progress io.Writer) ([]sideResult, error) {
	var out []sideResult
	for _, p := range o.protocols {
		for _, s := range sides(n) {
			out = append(out, sideResult{Side: s.name, Protocol: p})
		}
	}
	for round := range o.rounds {
		k := 0
		for _, p := range o.protocols {
			for _, s := range sides(n) {
				args := append([]string{"bench", "--servers", c.HTTP[c.Leader], "--create=false", "--json", "--protocol", p,
					"--concurrency", strconv.Itoa(o.concurrency), "--duration", o.duration.String(), "--warmup", o.warmup.String()}, s.args...)
				load := cluster.LoadAvg()
				r, err := runBench(ctx, bin, args)
				if err != nil {
					return out, fmt.Errorf("round %d, %s over %s: %w", round+1, s.name, p, err)
				}
				sr := &out[k]
				sr.RPS, sr.P50Ms, sr.Load = append(sr.RPS, r.ThroughputRPS), append(sr.P50Ms, r.P50Ms), append(sr.Load, load)
				sr.Errors += r.Errors
				if sr.FirstError == "" {
					sr.FirstError = r.FirstError
				}
				if r.TermAfter != r.TermBefore {
					sr.Elections++
				}
				logf(progress, "%d keys: round %d, %s %s: %.0f reserves/s, p50 %.2f ms, %d errors %s(load %.2f)", n, round+1, p, s.name, r.ThroughputRPS, r.P50Ms, r.Errors, r.FirstError, load)
				k++
			}
		}
	}
	for i := range out {
		out[i].MedianRPS, out[i].MedianP50Ms = median(out[i].RPS), median(out[i].P50Ms)
	}
	return out, nil
}

// benchResult is the part of permitd bench's JSON report read here.
type benchResult struct {
	ThroughputRPS float64 `json:"throughput_rps"`
	P50Ms         float64 `json:"p50_ms"`
	Requests      int64   `json:"requests"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error"`
	TermBefore    uint64  `json:"term_before"`
	TermAfter     uint64  `json:"term_after"`
}

// runBench runs bin with args (a permitd bench with --json) and decodes
// its report; an exit status other than 0 is an error.
func runBench(ctx context.Context, bin string, args []string) (benchResult, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.Output()
	var r benchResult
	if jerr := json.Unmarshal(out, &r); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return r, fmt.Errorf("permitd %v: %w (first error %q) %s", args, err, r.FirstError, stderr)
	}
	return r, nil
}

// median is the middle of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// restart makes every node take a raft snapshot, sends o.afterSnapshot
// reserves one at a time (log entries after it), stops the three agents,
// starts them again and times how long until every node answers its
// status (snapshot restored), has applied the last entry from before the
// stop (log replayed) and a reserve on an existing key is granted with
// all n keys there (ready).
func restart(ctx context.Context, o options, c *cluster.Cluster, n int, res *result, progress io.Writer) error {
	hc := &http.Client{Timeout: o.restartTimeout}
	for _, h := range c.HTTP {
		resp, err := hc.Post("http://"+h+"/v1/debug/snapshot", "application/json", nil)
		if err != nil {
			return fmt.Errorf("snapshot on %s: %w", h, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("snapshot on %s: %d %s", h, resp.StatusCode, body)
		}
	}
	for i := range o.afterSnapshot {
		if _, err := c.Client.Reserve(ctx, keyName(i%n), 1, 0); err != nil {
			return fmt.Errorf("reserve after the snapshot: %w", err)
		}
	}
	st, err := c.LeaderStatus(ctx)
	if err != nil {
		return err
	}
	res.SnapshotIndex, res.LastIndex = st.LastSnapshotIndex, st.LastLogIndex
	if res.SnapshotBytes, err = newestSnapshot(filepath.Join(c.Dir, c.IDs[c.Leader], "snapshots")); err != nil {
		return err
	}
	logf(progress, "%d keys: snapshot at %d (%.1f MiB), last entry %d; restarting", n, res.SnapshotIndex, float64(res.SnapshotBytes)/(1<<20), res.LastIndex)
	c.Stop()
	res.RestartLoad = cluster.LoadAvg()
	start := time.Now()
	if err := c.Launch(); err != nil {
		return err
	}
	probe, err := client.New(c.HTTP, client.WithAttemptTimeout(time.Second), client.WithRounds(1))
	if err != nil {
		return err
	}
	defer probe.Close()
	readyCtx, stopReady := context.WithTimeout(ctx, o.restartTimeout)
	defer stopReady()
	ready := make(chan float64, 1)
	go func() {
		// Its own client, with short attempts: a reserve sent before
		// there is a leader waits, and the status polls go on meanwhile.
		pr, err := client.New(c.HTTP, client.WithAttemptTimeout(250*time.Millisecond), client.WithRounds(1))
		if err != nil {
			return
		}
		defer pr.Close()
		for readyCtx.Err() == nil {
			if g, err := pr.Reserve(readyCtx, keyName(0), 1, 0); err == nil && g.Granted && checkLiveKeys(readyCtx, pr, n) == nil {
				ready <- time.Since(start).Seconds()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	answered, applied := make([]bool, len(c.HTTP)), make([]bool, len(c.HTTP))
	all := func(bs []bool) bool { return !slices.Contains(bs, false) }
	for res.StatusS == 0 || res.ReplayS == 0 || res.ReadyS == 0 {
		if readyCtx.Err() != nil {
			return fmt.Errorf("restart: not ready within %v (nodes answering %v, replayed %v, ready after %.2f s)", o.restartTimeout, answered, applied, res.ReadyS)
		}
		for i, h := range c.HTTP {
			st, err := probe.StatusOf(ctx, h)
			if err != nil {
				continue
			}
			answered[i] = true
			applied[i] = applied[i] || st.AppliedIndex >= res.LastIndex
		}
		since := time.Since(start).Seconds()
		if res.StatusS == 0 && all(answered) {
			res.StatusS = since
		}
		if res.ReplayS == 0 && all(applied) {
			res.ReplayS = since
		}
		select {
		case res.ReadyS = <-ready:
		case <-time.After(10 * time.Millisecond):
		}
	}
	logf(progress, "%d keys: every node answered after %.2f s, replayed after %.2f s, ready after %.2f s", n, res.StatusS, res.ReplayS, res.ReadyS)
	return c.WaitLeader(ctx, o.restartTimeout)
}

// newestSnapshot is the size of the newest snapshot's state below dir
// (raft's file snapshot store keeps each in a folder of its own, as
// state.bin).
func newestSnapshot(dir string) (int64, error) {
	var newest os.FileInfo
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "state.bin" {
			return err
		}
		fi, err := d.Info()
		if err == nil && (newest == nil || fi.ModTime().After(newest.ModTime())) {
			newest = fi
		}
		return err
	})
	if err == nil && newest == nil {
		err = errors.New("none there")
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot in %s: %w", dir, err)
	}
	return newest.Size(), nil
}

// logf writes one progress line, with the time.
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
