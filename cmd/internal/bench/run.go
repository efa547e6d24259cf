package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/wire"
)

// run.go: the run loop of permitd bench. Closed loop: --concurrency
// workers, each sending its next reserve when the last returns. Open loop:
// reserves start every 1/--open-rate s whatever the latency, at most
// --concurrency outstanding, and latency counts from the scheduled start
// (no coordinated omission); over the binary protocol without a
// goroutine per request (open.go). Requests that end during the
// measured --duration, after --warmup, are measured.

// benchClient sends reserves over keep-alive connections.
func benchHTTPClient(conns int, conf *tls.Config) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     conf,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func createLimit(ctx context.Context, hc *http.Client, servers []string, b Config) error {
	body := fmt.Sprintf(`{"algorithm":%q,"rate":%v,"per":%q}`, b.Algorithm, b.Rate, b.Per.String())
	if b.Algorithm == "strict" {
		// An expiry of an hour: by default a strict permit expires half
		// an interval after its slot, which at the default rate is long
		// before any answer can be sent, and the register would refuse
		// every grant as expired.
		body = fmt.Sprintf(`{"algorithm":"strict","rate":%v,"per":%q,"max_reserved":1000000,"expiry":"1h"}`, b.Rate, b.Per.String())
	}
	if b.Algorithm == "warmup" {
		body = fmt.Sprintf(`{"algorithm":"warmup","rate":%v,"per":%q,"warmup":"1s"}`, b.Rate, b.Per.String())
	}
	var last error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			req, _ := http.NewRequestWithContext(ctx, "PUT", b.scheme()+s+"/v1/limits/"+b.Limit, strings.NewReader(body))
			if b.Token != "" {
				req.Header.Set("Authorization", "Bearer "+b.Token)
			}
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
			last = fmt.Errorf("PUT %s: %d %s", b.Limit, resp.StatusCode, bytes.TrimSpace(msg))
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
	shed      atomic.Int64
	errs      atomic.Int64
	firstErr  atomic.Value
}

func (r *benchRecorder) record(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

func Run(ctx context.Context, b Config) (Result, error) {
	servers := b.Servers
	if len(servers) == 0 {
		return Result{}, errors.New("--servers is empty")
	}
	hc := benchHTTPClient(b.Concurrency, b.TLS)
	if b.Create {
		for _, name := range b.limitNames() {
			bl := b
			bl.Limit = name
			if err := createLimit(ctx, hc, servers, bl); err != nil {
				return Result{}, err
			}
		}
	}
	leaderBefore, termBefore := benchLeader(ctx, hc, servers, b)
	rec := &benchRecorder{}
	var idSeq atomic.Int64
	// Request IDs are unique across runs too: the register remembers IDs
	// for 10 minutes and would answer a reused one with its first decision.
	idPrefix := "b" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	path := "/v1/limits/" + b.Limit + "/reserve"
	if b.Limits > 0 {
		path = "/v1/reserve"
	}
	// one sends one reserve on c.
	one := func(c benchConn, buf *bytes.Buffer) (time.Duration, error) {
		count := rec.measuring.Load()
		id := ""
		if b.RequestIDs {
			id = idPrefix + strconv.FormatInt(idSeq.Add(1), 10)
		}
		start := time.Now()
		code, overloaded, err := c.reserve(buf, id)
		if err != nil {
			return 0, err
		}
		lat := time.Since(start)
		if overloaded {
			if count {
				rec.shed.Add(1)
			}
			return lat, errShed
		}
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
	// The open loop over the binary protocol has its own sender
	// (open.go); its connections are dialled below.
	openBinary := b.Mode == "open" && b.Protocol == "binary"
	var openConns []net.Conn
	if openBinary {
		defer func() {
			for _, c := range openConns {
				c.Close()
			}
		}()
		for k := 0; k < b.BinaryConns; k++ {
			cs, err := dialBinaryRaw(servers, b.TLS, b.Token)
			if err != nil {
				return Result{}, err
			}
			openConns = append(openConns, cs...)
		}
	}
	var shared [][]*wire.Conn
	if b.Protocol == "binary" && !openBinary {
		for k := 0; k < b.BinaryConns; k++ {
			cs, err := dialBinary(servers, b.TLS, b.Token)
			if err != nil {
				return Result{}, err
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
				cs[i] = binaryBenchConn{c: shared[int(connSeq.Add(1))%len(shared)][i], r: wire.Reserve{Limit: b.Limit, Permits: b.Permits, MaxWaitNanos: int64(b.MaxWait)}}
			} else {
				var header []string
				if b.Token != "" {
					header = append(header, "Authorization: Bearer "+b.Token)
				}
				cs[i] = httpBenchConn{c: httplite.NewTLS(s, 10*time.Second, b.TLS, header...), path: path, permits: b.Permits, maxWait: b.MaxWait,
					multi: b.multiPrefix()}
			}
		}
		return cs
	}
	fail := func(err error) {
		rec.errs.Add(1)
		rec.firstErr.CompareAndSwap(nil, err.Error())
	}
	runCtx, cancel := context.WithTimeout(ctx, wire.AddNanos(b.Warmup, b.Duration))
	defer cancel()
	var measuredStart time.Time
	go func() {
		select {
		case <-time.After(b.Warmup):
			measuredStart = time.Now()
			rec.measuring.Store(true)
		case <-runCtx.Done():
		}
	}()
	var wg sync.WaitGroup
	switch {
	case openBinary:
		r := wire.Reserve{Limit: b.Limit, Permits: b.Permits, MaxWaitNanos: int64(b.MaxWait)}
		same := wire.EncodeReserve(r)
		payload := func(int) []byte { return same }
		if b.RequestIDs {
			payload = func(int) []byte {
				r.RequestID = idPrefix + strconv.FormatInt(idSeq.Add(1), 10)
				return wire.EncodeReserve(r)
			}
		}
		if err := openLoopBinary(runCtx, b, openConns, payload, rec, fail); err != nil {
			return Result{}, err
		}
	case b.Mode == "closed":
		for w := 0; w < b.Concurrency; w++ {
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
					if b.MaxRequests > 0 && rec.requests.Load() >= b.MaxRequests {
						break
					}
					lat, err := one(conns[i%len(conns)], &buf)
					if !rec.measuring.Load() || runCtx.Err() != nil {
						continue
					}
					rec.requests.Add(1)
					if errors.Is(err, errShed) {
						continue
					}
					if err != nil {
						fail(err)
						continue
					}
					lats = append(lats, lat)
				}
				rec.record(lats)
			}()
		}
	default:
		sem := make(chan struct{}, b.Concurrency)
		pool := make(chan []benchConn, b.Concurrency)
		for k := 0; k < b.Concurrency; k++ {
			pool <- newConns()
		}
		defer func() {
			for k := 0; k < b.Concurrency; k++ {
				for _, c := range <-pool {
					c.Close()
				}
			}
		}()
		interval := time.Duration(wire.FloatNanos(float64(time.Second) / b.OpenRate))
		next := time.Now()
		var lmu sync.Mutex
		var lats []time.Duration
	loop:
		for i := 0; runCtx.Err() == nil; i++ {
			if b.MaxRequests > 0 && rec.requests.Load() >= b.MaxRequests {
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
				if errors.Is(err, errShed) {
					return
				}
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
		return Result{}, errors.New("run ended before the warm-up did")
	}
	res := rec.result(b, elapsed)
	res.LeaderBefore, res.TermBefore = leaderBefore, termBefore
	res.LeaderAfter, res.TermAfter = benchLeader(ctx, hc, servers, b)
	return res, nil
}

// errShed marks a reserve the node refused at once as overloaded.
var errShed = errors.New("overloaded")

// scheme is the URL scheme of the servers.
func (b Config) scheme() string {
	if b.TLS != nil {
		return "https://"
	}
	return "http://"
}

// benchLeader returns the leader and term the first answering server
// reports ("" and 0 if none answers within a few seconds).
func benchLeader(ctx context.Context, hc *http.Client, servers []string, b Config) (string, uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, s := range servers {
		var st struct {
			LeaderID string `json:"leader_id"`
			Term     uint64 `json:"term"`
		}
		if err := getStatus(ctx, hc, s, b, &st); err == nil && st.LeaderID != "" {
			return st.LeaderID, st.Term
		}
	}
	return "", 0
}

// getStatus decodes server's GET /v1/status (with bench's scheme and
// token) into out; an answer other than 200 is an error.
func getStatus(ctx context.Context, hc *http.Client, server string, b Config, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", b.scheme()+server+"/v1/status", nil)
	if err != nil {
		return err
	}
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("decoding it: %w", err)
	}
	return nil
}

// limitNames are the limits a run reserves from: --limit, or with
// --limits N, --limit, --limit-2, ..., --limit-N.
func (b Config) limitNames() []string {
	names := []string{b.Limit}
	for k := 2; k <= b.Limits; k++ {
		names = append(names, b.Limit+"-"+strconv.Itoa(k))
	}
	return names
}

// multiPrefix is the start of a multi-limit reserve's body (up to its
// max_wait), or "" for single-limit reserves.
func (b Config) multiPrefix() string {
	if b.Limits == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(`{"limits":[`)
	for i, name := range b.limitNames() {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":%q,"permits":%d}`, name, b.Permits)
	}
	fmt.Fprintf(&sb, `],"settle_within":%q`, b.Settle.String())
	return sb.String()
}
