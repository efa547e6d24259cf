package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
)

func init() {
	register("bench", "load-generate reserves against a cluster and report throughput and latency", runBench)
}

// benchFlags are bench's options.
type benchFlags struct {
	servers     string
	limit       string
	algorithm   string
	rate        float64
	per         time.Duration
	create      bool
	mode        string
	concurrency int
	openRate    float64
	duration    time.Duration
	warmup      time.Duration
	maxWait     time.Duration
	permits     int64
	jsonOut     bool
	requestIDs  bool
	maxRequests int64
}

// BenchResult is bench's report (printed as a table or, with --json, as
// this object).
type BenchResult struct {
	Mode          string  `json:"mode"`
	Concurrency   int     `json:"concurrency"`
	OpenRate      float64 `json:"open_rate,omitempty"`
	Servers       string  `json:"servers"`
	Limit         string  `json:"limit"`
	DurationSec   float64 `json:"duration_s"`
	Requests      int64   `json:"requests"`
	Granted       int64   `json:"granted"`
	Refused       int64   `json:"refused"`
	Errors        int64   `json:"errors"`
	ThroughputRPS float64 `json:"throughput_rps"`
	P50Ms         float64 `json:"p50_ms"`
	P90Ms         float64 `json:"p90_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	FirstError    string  `json:"first_error,omitempty"`
}

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b benchFlags
	fs.StringVar(&b.servers, "servers", "127.0.0.1:8001", "HTTPADDR,... of the nodes to send to (round-robin per worker)")
	fs.StringVar(&b.limit, "limit", "bench", "limit to reserve from")
	fs.BoolVar(&b.create, "create", true, "create (or replace) the limit before the run")
	fs.StringVar(&b.algorithm, "algorithm", "strict", "algorithm of the created limit: strict, bursty, warmup, hybrid")
	fs.Float64Var(&b.rate, "rate", 1e9, "rate of the created limit (permits per --per); high by default so that the register, not the limit, is measured")
	fs.DurationVar(&b.per, "per", time.Second, "period of the created limit's rate")
	fs.StringVar(&b.mode, "mode", "closed", "closed: each worker sends its next request when the last returns; open: requests start at --open-rate/s whatever the latency")
	fs.IntVar(&b.concurrency, "concurrency", 16, "closed loop: workers; open loop: most requests outstanding")
	fs.Float64Var(&b.openRate, "open-rate", 1000, "open loop: requests per second")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "measured duration")
	fs.DurationVar(&b.warmup, "warmup", time.Second, "unmeasured warm-up before the measured duration")
	fs.DurationVar(&b.maxWait, "max-wait", time.Second, "max_wait of each reserve")
	fs.Int64Var(&b.permits, "permits", 1, "permits per reserve")
	fs.BoolVar(&b.requestIDs, "request-ids", false, "send a unique request_id with every reserve (exercises deduplication)")
	fs.Int64Var(&b.maxRequests, "max-requests", 0, "stop after this many measured requests (0: no cap)")
	fs.BoolVar(&b.jsonOut, "json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: permitd bench [flags]

Sends reserves (one decision per HTTP request, keep-alive connections) to the
given nodes and reports throughput, latency percentiles, granted, refused and
errors. Latency in open-loop mode counts from each request's scheduled start,
so a slow server cannot hide queueing (no coordinated omission).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if b.concurrency < 1 || b.duration <= 0 || b.warmup < 0 || b.permits < 1 || (b.mode != "closed" && b.mode != "open") || (b.mode == "open" && !(b.openRate > 0)) {
		fmt.Fprintln(stderr, "permitd bench: need --concurrency >= 1, --duration > 0, --warmup >= 0, --permits >= 1, --mode closed|open, and --open-rate > 0 in open mode")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := bench(ctx, b)
	if err != nil {
		fmt.Fprintln(stderr, "permitd bench:", err)
		return 1
	}
	if b.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printBench(stdout, res)
	}
	if res.Requests == 0 || res.Errors > res.Requests/100 {
		return 1
	}
	return 0
}

func printBench(w io.Writer, r BenchResult) {
	fmt.Fprintf(w, "mode=%s concurrency=%d servers=%s limit=%s duration=%.1fs\n", r.Mode, r.Concurrency, r.Servers, r.Limit, r.DurationSec)
	fmt.Fprintf(w, "requests=%d granted=%d refused=%d errors=%d\n", r.Requests, r.Granted, r.Refused, r.Errors)
	fmt.Fprintf(w, "throughput=%.0f req/s  latency p50=%.3fms p90=%.3fms p99=%.3fms p99.9=%.3fms max=%.3fms\n", r.ThroughputRPS, r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
}

// benchClient sends reserves over keep-alive connections.
func benchHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func createLimit(ctx context.Context, hc *http.Client, servers []string, b benchFlags) error {
	body := fmt.Sprintf(`{"algorithm":%q,"rate":%v,"per":%q}`, b.algorithm, b.rate, b.per.String())
	if b.algorithm == "strict" {
		body = fmt.Sprintf(`{"algorithm":"strict","rate":%v,"per":%q,"max_reserved":1000000}`, b.rate, b.per.String())
	}
	if b.algorithm == "warmup" {
		body = fmt.Sprintf(`{"algorithm":"warmup","rate":%v,"per":%q,"warmup":"1s"}`, b.rate, b.per.String())
	}
	var last error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			req, _ := http.NewRequestWithContext(ctx, "PUT", "http://"+s+"/v1/limits/"+b.limit, strings.NewReader(body))
			resp, err := hc.Do(req)
			if err != nil {
				last = err
				continue
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = fmt.Errorf("PUT %s: %d %s", b.limit, resp.StatusCode, bytes.TrimSpace(msg))
			if resp.StatusCode/100 == 4 {
				return last
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("create limit: %w", last)
}

type benchRecorder struct {
	mu        sync.Mutex
	lat       []time.Duration
	measuring atomic.Bool
	requests  atomic.Int64
	granted   atomic.Int64
	refused   atomic.Int64
	errs      atomic.Int64
	firstErr  atomic.Value
}

func (r *benchRecorder) record(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

func bench(ctx context.Context, b benchFlags) (BenchResult, error) {
	servers := splitList(b.servers)
	if len(servers) == 0 {
		return BenchResult{}, errors.New("--servers is empty")
	}
	hc := benchHTTPClient(b.concurrency)
	if b.create {
		if err := createLimit(ctx, hc, servers, b); err != nil {
			return BenchResult{}, err
		}
	}
	rec := &benchRecorder{}
	var idSeq atomic.Int64
	path := "/v1/limits/" + b.limit + "/reserve"
	// one sends one reserve on c; the body is built in buf.
	one := func(c *httplite.Conn, buf *bytes.Buffer) (time.Duration, error) {
		count := rec.measuring.Load()
		buf.Reset()
		if b.requestIDs {
			fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q,"request_id":"b%d"}`, b.permits, b.maxWait.String(), idSeq.Add(1))
		} else {
			fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q}`, b.permits, b.maxWait.String())
		}
		start := time.Now()
		code, _, err := c.Do("POST", path, buf.Bytes())
		if err != nil {
			return 0, err
		}
		lat := time.Since(start)
		switch code {
		case 200:
			if count {
				rec.granted.Add(1)
			}
		case 429:
			if count {
				rec.refused.Add(1)
			}
		default:
			return lat, fmt.Errorf("HTTP %d", code)
		}
		return lat, nil
	}
	// Connections: closed loop, one per worker and server; open loop, a
	// pool per server.
	newConns := func() []*httplite.Conn {
		cs := make([]*httplite.Conn, len(servers))
		for i, s := range servers {
			cs[i] = httplite.New(s, 10*time.Second)
		}
		return cs
	}
	fail := func(err error) {
		rec.errs.Add(1)
		rec.firstErr.CompareAndSwap(nil, err.Error())
	}
	runCtx, cancel := context.WithTimeout(ctx, b.warmup+b.duration)
	defer cancel()
	var measuredStart time.Time
	go func() {
		select {
		case <-time.After(b.warmup):
			measuredStart = time.Now()
			rec.measuring.Store(true)
		case <-runCtx.Done():
		}
	}()
	var wg sync.WaitGroup
	if b.mode == "closed" {
		for w := 0; w < b.concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf bytes.Buffer
				conns := newConns()
				defer func() {
					for _, c := range conns {
						c.Close()
					}
				}()
				lats := make([]time.Duration, 0, 4096)
				for i := w; runCtx.Err() == nil; i++ {
					if b.maxRequests > 0 && rec.requests.Load() >= b.maxRequests {
						break
					}
					lat, err := one(conns[i%len(conns)], &buf)
					if !rec.measuring.Load() || runCtx.Err() != nil {
						continue
					}
					rec.requests.Add(1)
					if err != nil {
						fail(err)
						continue
					}
					lats = append(lats, lat)
				}
				rec.record(lats)
			}()
		}
	} else {
		sem := make(chan struct{}, b.concurrency)
		pool := make(chan []*httplite.Conn, b.concurrency)
		for k := 0; k < b.concurrency; k++ {
			pool <- newConns()
		}
		defer func() {
			for k := 0; k < b.concurrency; k++ {
				for _, c := range <-pool {
					c.Close()
				}
			}
		}()
		interval := time.Duration(float64(time.Second) / b.openRate)
		next := time.Now()
		var lmu sync.Mutex
		var lats []time.Duration
	loop:
		for i := 0; runCtx.Err() == nil; i++ {
			if b.maxRequests > 0 && rec.requests.Load() >= b.maxRequests {
				break
			}
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-runCtx.Done():
					break loop
				}
			}
			scheduled := next
			select {
			case sem <- struct{}{}:
			case <-runCtx.Done():
				break loop
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				var buf bytes.Buffer
				conns := <-pool
				_, err := one(conns[i%len(conns)], &buf)
				pool <- conns
				lat := time.Since(scheduled)
				if !rec.measuring.Load() || runCtx.Err() != nil {
					return
				}
				rec.requests.Add(1)
				if err != nil {
					fail(err)
					return
				}
				lmu.Lock()
				lats = append(lats, lat)
				lmu.Unlock()
			}()
		}
		wg.Wait()
		rec.record(lats)
	}
	wg.Wait()
	elapsed := time.Since(measuredStart)
	if measuredStart.IsZero() || elapsed <= 0 {
		return BenchResult{}, errors.New("run ended before the warm-up did")
	}
	slices.Sort(rec.lat)
	pct := func(p float64) float64 {
		if len(rec.lat) == 0 {
			return math.NaN()
		}
		i := int(math.Ceil(p*float64(len(rec.lat)))) - 1
		i = max(0, min(i, len(rec.lat)-1))
		return float64(rec.lat[i]) / 1e6
	}
	res := BenchResult{
		Mode: b.mode, Concurrency: b.concurrency, Servers: b.servers, Limit: b.limit,
		DurationSec: elapsed.Seconds(), Requests: rec.requests.Load(), Granted: rec.granted.Load(),
		Refused: rec.refused.Load(), Errors: rec.errs.Load(),
		P50Ms: pct(0.50), P90Ms: pct(0.90), P99Ms: pct(0.99), P999Ms: pct(0.999), MaxMs: pct(1),
	}
	if b.mode == "open" {
		res.OpenRate = b.openRate
	}
	res.ThroughputRPS = float64(res.Requests-res.Errors) / elapsed.Seconds()
	if v, ok := rec.firstErr.Load().(string); ok {
		res.FirstError = v
	}
	return res, nil
}
