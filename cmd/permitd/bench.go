package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/wire"
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
	protocol    string
	binaryConns int
}

// BenchResult is bench's report (printed as a table or, with --json, as
// this object).
type BenchResult struct {
	Mode          string  `json:"mode"`
	Protocol      string  `json:"protocol"`
	Concurrency   int     `json:"concurrency"`
	OpenRate      float64 `json:"open_rate,omitempty"`
	Servers       string  `json:"servers"`
	Limit         string  `json:"limit"`
	DurationSec   float64 `json:"duration_s"`
	Requests      int64   `json:"requests"`
	Granted       int64   `json:"granted"`
	Refused       int64   `json:"refused"`
	RefusedShare  float64 `json:"refused_share"`
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
	c := newCmdLine("bench", "bench [flags]", `
Sends reserves (one decision per request: an HTTP request on keep-alive
connections, or a frame of the binary protocol with --protocol binary) to the
given nodes and reports throughput, latency percentiles, granted, refused and
errors. Latency in open-loop mode counts from each request's scheduled start,
so a slow server cannot hide queueing (no coordinated omission).

Exit status: 0 ok; 1 no request measured, more than 1% errors, or the limit
could not be created; 2 usage error.
`, stdout, stderr)
	var b benchFlags
	c.List(&b.servers, "servers", "HTTPADDR,...", "127.0.0.1:8001", "HTTP addresses of the nodes to send to (round-robin per worker)", checkHostPort)
	c.String(&b.limit, "limit", "NAME", "bench", "limit to reserve from", func(s string) error { return checkName("limit name", s) })
	c.Bool(&b.create, "create", true, "create (or replace) the limit before the run")
	c.Choice(&b.algorithm, "algorithm", "strict", "algorithm of the created limit", algorithms...)
	c.Float(&b.rate, "rate", "R", 1e9, positive, "a number > 0", "rate of the created limit (permits per --per); high by default so that the register, not the limit, is measured")
	c.Duration(&b.per, "per", time.Second, durPositive, "period of the created limit's rate")
	c.Choice(&b.mode, "mode", "closed", "closed: each worker sends its next request when the last returns; open: requests start at --open-rate/s whatever the latency", "closed", "open")
	c.Int(&b.concurrency, "concurrency", "N", 16, 1, 1<<20, "an integer >= 1", "closed loop: workers; open loop: most requests outstanding")
	c.Float(&b.openRate, "open-rate", "R", 1000, positive, "a number > 0", "open loop: requests per second")
	c.Duration(&b.duration, "duration", 10*time.Second, durPositive, "measured duration")
	c.Duration(&b.warmup, "warmup", time.Second, durNonNegative, "unmeasured warm-up before the measured duration")
	c.Duration(&b.maxWait, "max-wait", time.Second, durNonNegative, "max_wait of each reserve")
	c.Int64(&b.permits, "permits", "N", 1, 1, 1<<62, "an integer >= 1", "permits per reserve")
	c.Bool(&b.requestIDs, "request-ids", false, "send a unique request_id with every reserve (exercises deduplication)")
	c.Int64(&b.maxRequests, "max-requests", "N", 0, 0, math.MaxInt64, "an integer >= 0", "stop after this many measured requests (0: no cap)")
	c.Bool(&b.jsonOut, "json", false, "print the result as JSON")
	c.Choice(&b.protocol, "protocol", "http", "http: one decision per HTTP/1.1 request, one keep-alive connection per worker and server; binary: one decision per frame of the binary protocol, every worker sharing --binary-conns pipelined connections per server", "http", "binary")
	c.Int(&b.binaryConns, "binary-conns", "N", 1, 1, 64, "an integer from 1 to 64", "binary protocol: pipelined connections per server")
	if ok, code := c.parse(args); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := bench(ctx, b)
	if err != nil {
		return c.fail(exitFailure, err)
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
	fmt.Fprintf(w, "mode=%s protocol=%s concurrency=%d servers=%s limit=%s duration=%.1fs\n", r.Mode, r.Protocol, r.Concurrency, r.Servers, r.Limit, r.DurationSec)
	fmt.Fprintf(w, "requests=%d granted=%d refused=%d (%.2f%%) errors=%d\n", r.Requests, r.Granted, r.Refused, 100*r.RefusedShare, r.Errors)
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
		// An expiry of an hour: by default a strict permit expires half
		// an interval after its slot, which at the default rate is long
		// before any answer can be sent, and the register would refuse
		// every grant as expired.
		body = fmt.Sprintf(`{"algorithm":"strict","rate":%v,"per":%q,"max_reserved":1000000,"expiry":"1h"}`, b.rate, b.per.String())
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
	// Request IDs are unique across runs too: the register remembers IDs
	// for 10 minutes and would answer a reused one with its first decision.
	idPrefix := "b" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	path := "/v1/limits/" + b.limit + "/reserve"
	// one sends one reserve on c.
	one := func(c benchConn, buf *bytes.Buffer) (time.Duration, error) {
		count := rec.measuring.Load()
		id := ""
		if b.requestIDs {
			id = idPrefix + strconv.FormatInt(idSeq.Add(1), 10)
		}
		start := time.Now()
		code, err := c.reserve(buf, id)
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
	// Connections: over HTTP, closed loop, one per worker and server; open
	// loop, a pool per server. Over the binary protocol every worker
	// shares --binary-conns pipelined connections per server.
	var shared [][]*wire.Conn
	if b.protocol == "binary" {
		for k := 0; k < b.binaryConns; k++ {
			cs, err := dialBinary(servers)
			if err != nil {
				return BenchResult{}, err
			}
			shared = append(shared, cs)
		}
		defer func() {
			for _, cs := range shared {
				for _, c := range cs {
					c.Close()
				}
			}
		}()
	}
	var connSeq atomic.Int64
	newConns := func() []benchConn {
		cs := make([]benchConn, len(servers))
		for i, s := range servers {
			if shared != nil {
				cs[i] = binaryBenchConn{c: shared[int(connSeq.Add(1))%len(shared)][i], r: wire.Reserve{Limit: b.limit, Permits: b.permits, MaxWaitNanos: int64(b.maxWait)}}
			} else {
				cs[i] = httpBenchConn{c: httplite.New(s, 10*time.Second), path: path, permits: b.permits, maxWait: b.maxWait}
			}
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
		pool := make(chan []benchConn, b.concurrency)
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
		Mode: b.mode, Protocol: b.protocol, Concurrency: b.concurrency, Servers: b.servers, Limit: b.limit,
		DurationSec: elapsed.Seconds(), Requests: rec.requests.Load(), Granted: rec.granted.Load(),
		Refused: rec.refused.Load(), Errors: rec.errs.Load(),
		RefusedShare: share(rec.refused.Load(), rec.requests.Load()),
		P50Ms:        pct(0.50), P90Ms: pct(0.90), P99Ms: pct(0.99), P999Ms: pct(0.999), MaxMs: pct(1),
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

// benchConn sends one reserve and answers with the HTTP status it stands
// for (200 granted, 429 refused).
type benchConn interface {
	reserve(buf *bytes.Buffer, requestID string) (int, error)
	Close()
}

// httpBenchConn is one keep-alive HTTP/1.1 connection.
type httpBenchConn struct {
	c       *httplite.Conn
	path    string
	permits int64
	maxWait time.Duration
}

func (h httpBenchConn) reserve(buf *bytes.Buffer, requestID string) (int, error) {
	buf.Reset()
	if requestID != "" {
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q,"request_id":%q}`, h.permits, h.maxWait.String(), requestID)
	} else {
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q}`, h.permits, h.maxWait.String())
	}
	code, _, err := h.c.Do("POST", h.path, buf.Bytes())
	return code, err
}

func (h httpBenchConn) Close() { h.c.Close() }

// binaryBenchConn is a share of a pipelined binary connection.
type binaryBenchConn struct {
	c *wire.Conn
	r wire.Reserve
}

func (bc binaryBenchConn) reserve(_ *bytes.Buffer, requestID string) (int, error) {
	r := bc.r
	r.RequestID = requestID
	code, resp, err := bc.c.Call(context.Background(), wire.OpReserve, wire.EncodeReserve(r))
	if err != nil {
		return 0, err
	}
	if code != wire.CodeOK {
		return 0, fmt.Errorf("binary answer code %d: %s", code, resp)
	}
	res, err := wire.DecodeReserveResult(resp)
	if err != nil {
		return 0, err
	}
	switch res.Status {
	case wire.Granted:
		return 200, nil
	case wire.Refused:
		return 429, nil
	}
	return 0, fmt.Errorf("reserve status %d: %s", res.Status, res.Detail)
}

// Close is a no-op: the connection is shared and closed by bench.
func (bc binaryBenchConn) Close() {}

// dialBinary opens one binary connection to each server.
func dialBinary(servers []string) ([]*wire.Conn, error) {
	out := make([]*wire.Conn, 0, len(servers))
	for _, s := range servers {
		nc, err := net.DialTimeout("tcp", s, 5*time.Second)
		if err == nil {
			_, err = nc.Write([]byte{wire.ClientPreface})
		}
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("bench: binary connection to %s: %w", s, err)
		}
		out = append(out, wire.NewConn(nc))
	}
	return out, nil
}

// share is part/total, 0 for an empty total.
func share(part, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(part) / float64(total)
}
