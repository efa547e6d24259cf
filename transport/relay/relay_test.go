package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/devcerts"
	"github.com/permitd/permitd/transport/tlsfiles"
	"github.com/permitd/permitd/transport/wire"
)

// fakeUpstream answers every renewal granted with Permits set to its
// LeaseID, so that each caller can tell its own answer; while hold is
// set, each batch waits for a value on it; fail makes every batch fail.
type fakeUpstream struct {
	mu      sync.Mutex
	batches [][]wire.LeaseCall
	hold    chan struct{}
	fail    error
	sent    chan int // the size of each batch, as it arrives (buffered)
}

func newFake() *fakeUpstream { return &fakeUpstream{sent: make(chan int, 1024)} }

func (f *fakeUpstream) LeaseBatch(ctx context.Context, calls []wire.LeaseCall) ([]wire.LeaseAnswer, error) {
	f.mu.Lock()
	f.batches = append(f.batches, calls)
	hold, fail := f.hold, f.fail
	f.mu.Unlock()
	f.sent <- len(calls)
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	answers := make([]wire.LeaseAnswer, len(calls))
	for i, c := range calls {
		q, err := wire.DecodeLeaseRenew(c.Payload)
		if c.Op != wire.OpRenew || err != nil {
			answers[i] = wire.LeaseAnswer{Code: wire.CodeInvalid, Payload: []byte("fake: renewals only")}
			continue
		}
		answers[i] = wire.LeaseAnswer{Code: wire.CodeOK, Payload: wire.EncodeLeaseResult(wire.LeaseResult{
			Status: wire.LeaseGranted, LeaseID: q.LeaseID, Epoch: q.Epoch + 1, Permits: int64(q.LeaseID), ExpiresInNanos: int64(2 * time.Second)})}
	}
	return answers, nil
}

// startRelay serves a relay over up on a loopback port.
func startRelay(t *testing.T, cfg Config) (*Relay, string) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ln) }()
	t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r, ln.Addr().String()
}

// dialRaw opens a binary connection to the relay (the preface written).
func dialRaw(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{wire.ClientPreface}); err != nil {
		t.Fatal(err)
	}
	wc := wire.NewConn(c)
	t.Cleanup(wc.Close)
	return wc
}

func renewal(id uint64, requestID string) []byte {
	return wire.EncodeLeaseRenew(wire.LeaseRenew{LeaseReport: wire.LeaseReport{Limit: "api", LeaseID: id, Epoch: 1, Spent: 1, RequestID: requestID}, DemandMilli: 1000, TTLNanos: int64(2 * time.Second)})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRelayBatchesWhatArrivesMeanwhile: a renewal that arrives while no
// batch is out leaves at once, alone; the renewals that arrive while it is
// with the register leave together in the next batch; each caller gets
// its own command's answer, through the Go client.
func TestRelayBatchesWhatArrivesMeanwhile(t *testing.T) {
	up := newFake()
	up.hold = make(chan struct{})
	r, addr := startRelay(t, Config{Upstream: up})
	cl, err := client.New([]string{addr}, client.WithBinaryLeases())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t)
	renew := func(id uint64) (client.LeaseGrant, error) {
		return cl.Renew(ctx, "api", id, 1, client.LeaseReport{Spent: 1, DemandMilliPerSec: 1000, TTL: 2 * time.Second})
	}
	type result struct {
		id  uint64
		g   client.LeaseGrant
		err error
	}
	results := make(chan result, 11)
	go func() { g, err := renew(1); results <- result{1, g, err} }()
	if n := <-up.sent; n != 1 {
		t.Fatalf("the first renewal left in a batch of %d; want alone", n)
	}
	for id := uint64(2); id <= 11; id++ {
		go func() { g, err := renew(id); results <- result{id, g, err} }()
	}
	// The ten wait for the first batch: they queue, then leave together.
	waitFor(t, "ten renewals queued behind the first batch", func() bool { return r.Stats().Queued == 10 })
	up.hold <- struct{}{}
	if n := <-up.sent; n != 10 {
		t.Fatalf("the ten renewals sent while a batch was out left in a batch of %d; want 10", n)
	}
	up.hold <- struct{}{}
	for range 11 {
		r := <-results
		if r.err != nil || !r.g.Granted() || r.g.Permits != int64(r.id) || r.g.Epoch != 2 {
			t.Errorf("renewal of lease %d: %+v, %v; want its own grant (%d permits, epoch 2)", r.id, r.g, r.err, r.id)
		}
	}
}

// TestRelayRefusesWhatItCannotRelay: a command that does not decode, one
// without a request ID and an operation other than a lease command are
// answered CodeInvalid by the relay itself, each saying why, and reach
// nothing upstream; an auth call without tokens is a no-op; a valid
// renewal on the same connection still goes through.
func TestRelayRefusesWhatItCannotRelay(t *testing.T) {
	up := newFake()
	r, addr := startRelay(t, Config{Upstream: up})
	wc := dialRaw(t, addr)
	ctx := ctxTimeout(t)
	for _, tc := range []struct {
		name    string
		op      byte
		payload []byte
		want    byte
		mention string
	}{
		{"garbage renewal", wire.OpRenew, []byte{0xff}, wire.CodeInvalid, "renew"},
		{"no request ID", wire.OpRenew, renewal(3, ""), wire.CodeInvalid, "request ID"},
		{"a reserve", wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: "api", Permits: 1, RequestID: "r"}), wire.CodeInvalid, "lease commands only"},
		{"a lease batch", wire.OpLeaseBatch, []byte{0}, wire.CodeInvalid, "lease commands only"},
		{"auth without tokens", wire.OpAuth, []byte("secret"), wire.CodeOK, ""},
	} {
		code, msg, err := wc.Call(ctx, tc.op, tc.payload)
		if err != nil || code != tc.want || !strings.Contains(string(msg), tc.mention) {
			t.Errorf("%s: code %d %q, %v; want %d mentioning %q", tc.name, code, msg, err, tc.want, tc.mention)
		}
	}
	if st := r.Stats(); st.Batches != 0 || st.Commands != 0 || st.Refused != 4 {
		t.Errorf("refused commands went upstream: %+v", st)
	}
	code, resp, err := wc.Call(ctx, wire.OpRenew, renewal(5, "r-5"))
	if res, derr := wire.DecodeLeaseResult(resp); err != nil || code != wire.CodeOK || derr != nil || res.Permits != 5 {
		t.Errorf("a valid renewal after the refusals: code %d %+v, %v %v", code, res, err, derr)
	}
}

// TestRelayAnswersAFailedBatchNoLeader: when the register does not answer
// a batch, each of its commands is answered CodeNoLeader (outcome
// unknown: the worker's client retries it at its next server with the
// same request ID), with the reason.
func TestRelayAnswersAFailedBatchNoLeader(t *testing.T) {
	up := newFake()
	up.fail = errors.New("client: every server refused the connection")
	r, addr := startRelay(t, Config{Upstream: up})
	wc := dialRaw(t, addr)
	code, msg, err := wc.Call(ctxTimeout(t), wire.OpRenew, renewal(1, "r-1"))
	if err != nil || code != wire.CodeNoLeader || !strings.Contains(string(msg), "outcome unknown") || !strings.Contains(string(msg), "refused the connection") {
		t.Errorf("a renewal whose batch failed: code %d %q, %v; want CodeNoLeader with the reason", code, msg, err)
	}
	if st := r.Stats(); st.FailedBatches != 1 || st.Batches != 1 {
		t.Errorf("stats after a failed batch: %+v", st)
	}
	// Through the Go client, that answer is a 503 that moves to the next
	// server: with the relay as the only one, the call fails unavailable.
	cl, err := client.New([]string{addr}, client.WithBinaryLeases(), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Renew(ctxTimeout(t), "api", 1, 1, client.LeaseReport{Spent: 1, TTL: 2 * time.Second}); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("the client's renewal through a relay whose register is down: %v; want ErrUnavailable", err)
	}
}

// TestRelayShedsBeyondItsQueue: with a batch out and the queue full, a
// command is answered CodeOverloaded at once; one connection cannot have
// more than maxConnCommands commands waiting; and the queued commands are
// all answered once the register answers.
func TestRelayShedsBeyondItsQueue(t *testing.T) {
	up := newFake()
	up.hold = make(chan struct{})
	r, addr := startRelay(t, Config{Upstream: up, MaxQueue: wire.MaxLeaseBatch})
	conns := []*wire.Conn{dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)}
	ctx := ctxTimeout(t)
	type answer struct {
		code byte
		msg  string
		err  error
	}
	answers := make(chan answer, 2*wire.MaxLeaseBatch)
	call := func(wc *wire.Conn, id uint64) {
		code, msg, err := wc.Call(ctx, wire.OpRenew, renewal(id, fmt.Sprint("r-", id)))
		answers <- answer{code, string(msg), err}
	}
	go call(conns[0], 1)
	<-up.sent
	// A full queue, from two connections: the next command is shed.
	for id := range uint64(wire.MaxLeaseBatch) {
		go call(conns[id%2], id+2)
	}
	waitFor(t, "a full queue", func() bool { return r.Stats().Queued == wire.MaxLeaseBatch })
	code, msg, err := conns[2].Call(ctx, wire.OpRenew, renewal(9999, "r-9999"))
	if err != nil || code != wire.CodeOverloaded || !strings.Contains(string(msg), "waiting for the register") {
		t.Errorf("a renewal beyond the queue: code %d %q, %v; want CodeOverloaded", code, msg, err)
	}
	up.hold <- struct{}{}
	<-up.sent
	up.hold <- struct{}{}
	for range wire.MaxLeaseBatch + 1 {
		if a := <-answers; a.err != nil || a.code != wire.CodeOK {
			t.Fatalf("a queued renewal: code %d %q, %v; want answered", a.code, a.msg, a.err)
		}
	}

	// One connection: at most maxConnCommands waiting, even with room in
	// the queue.
	big, bigAddr := startRelay(t, Config{Upstream: up, MaxQueue: 4 * maxConnCommands})
	wc := dialRaw(t, bigAddr)
	for id := range uint64(maxConnCommands) {
		go call(wc, id+1)
	}
	<-up.sent
	waitFor(t, "a connection's commands waiting", func() bool { return big.Stats().Commands == maxConnCommands })
	code, msg, err = wc.Call(ctx, wire.OpRenew, renewal(7777, "r-7777"))
	if err != nil || code != wire.CodeOverloaded || !strings.Contains(string(msg), "of this connection") {
		t.Errorf("a connection's command beyond its bound: code %d %q, %v; want CodeOverloaded", code, msg, err)
	}
	go func() {
		for {
			select {
			case up.hold <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range maxConnCommands {
		if a := <-answers; a.err != nil || a.code != wire.CodeOK {
			t.Fatalf("a connection's renewal: code %d %q, %v; want answered", a.code, a.msg, a.err)
		}
	}
}

// TestRelayRequiresAWorkerToken: with tokens, a connection whose first
// call is not auth, an unknown token and a client token are refused and
// closed, a worker token relays, and once a reload revokes it the next
// call on the open connection is refused.
func TestRelayRequiresAWorkerToken(t *testing.T) {
	store, secrets, err := auth.NewTokenStoreOf(auth.Spec{Name: "w1", Role: auth.RoleWorker}, auth.Spec{Name: "app", Role: auth.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	up := newFake()
	r, addr := startRelay(t, Config{Upstream: up, Tokens: store})
	ctx := ctxTimeout(t)
	for _, tc := range []struct {
		name, secret string
		want         byte
		mention      string
	}{
		{"no auth", "", wire.CodeUnauthenticated, "requires API tokens"},
		{"unknown token", "pd_nope", wire.CodeUnauthenticated, "unknown or revoked"},
		{"client token", secrets["app"], wire.CodeForbidden, "worker"},
	} {
		wc := dialRaw(t, addr)
		op, payload := wire.OpAuth, []byte(tc.secret)
		if tc.secret == "" {
			op, payload = wire.OpRenew, renewal(1, "r-1")
		}
		code, msg, err := wc.Call(ctx, op, payload)
		if err != nil || code != tc.want || !strings.Contains(string(msg), tc.mention) || strings.Contains(string(msg), secrets["app"]) {
			t.Errorf("%s: code %d %q, %v; want %d mentioning %q (and no secret)", tc.name, code, msg, err, tc.want, tc.mention)
		}
		if _, _, err := wc.Call(ctx, wire.OpRenew, renewal(1, "r-1")); !errors.Is(err, wire.ErrBroken) {
			t.Errorf("%s: the connection stayed open after the refusal: %v", tc.name, err)
		}
	}
	cl, err := client.New([]string{addr}, client.WithBinaryLeases(), client.WithToken(secrets["w1"]), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if g, err := cl.Renew(ctx, "api", 7, 1, client.LeaseReport{Spent: 1, TTL: 2 * time.Second}); err != nil || g.Permits != 7 {
		t.Fatalf("a worker token's renewal: %+v, %v", g, err)
	}
	if r.Stats().Batches != 1 {
		t.Fatalf("refused connections reached the register: %+v", r.Stats())
	}
	empty, err := auth.ParseTokenFile(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	store.Replace(empty)
	_, err = cl.Renew(ctx, "api", 7, 1, client.LeaseReport{Spent: 1, TTL: 2 * time.Second})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.Message, `"w1" was revoked`) {
		t.Errorf("a renewal after the token was revoked: %v; want 401 naming the token", err)
	}
}

// TestRelayAnswersHTTPWithAClearError: a connection that does not start
// with the binary protocol's preface (an HTTP request) gets a 400 that
// says what the port serves, and is closed.
func TestRelayAnswersHTTPWithAClearError(t *testing.T) {
	_, addr := startRelay(t, Config{Upstream: newFake()})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	rest, _ := io.ReadAll(br)
	if !strings.HasPrefix(line, "HTTP/1.1 400") || !strings.Contains(string(rest), "lease commands only") {
		t.Errorf("an HTTP request to the relay: %q %q", line, rest)
	}
}

// TestRelayServesTLS: with Config.TLS the relay serves its workers over
// TLS: the Go client with the CA relays a renewal, a plaintext connection
// gets no answer.
func TestRelayServesTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := devcerts.Create(devcerts.Request{Dir: dir, Nodes: []string{"relay"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cert, key := devcerts.NodeFiles("relay")
	serverConf, err := tlsfiles.Server(filepath.Join(dir, cert), filepath.Join(dir, key), "", false)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startRelay(t, Config{Upstream: newFake(), TLS: serverConf})
	clientConf, err := tlsfiles.Client(filepath.Join(dir, devcerts.CACert), "", "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New([]string{addr}, client.WithBinaryLeases(), client.WithTLS(clientConf), client.WithRounds(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t)
	if g, err := cl.Renew(ctx, "api", 9, 1, client.LeaseReport{Spent: 1, TTL: 2 * time.Second}); err != nil || g.Permits != 9 {
		t.Fatalf("a renewal over TLS: %+v, %v", g, err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	wc := wire.NewConn(c)
	defer wc.Close()
	if _, err := c.Write([]byte{wire.ClientPreface}); err != nil {
		t.Fatal(err)
	}
	if code, msg, err := wc.Call(ctx, wire.OpRenew, renewal(9, "r-9")); err == nil {
		t.Errorf("a plaintext renewal to a TLS relay was answered: code %d %q", code, msg)
	}
}

// TestRelaySplitsBatches: the commands queued behind a batch leave in
// batches of at most wire.MaxLeaseBatch commands and one client frame's
// payload, with MaxInFlight batches out at once, and every caller gets
// its own answer.
func TestRelaySplitsBatches(t *testing.T) {
	up := newFake()
	up.hold = make(chan struct{})
	r, addr := startRelay(t, Config{Upstream: up, MaxInFlight: 2, MaxQueue: 4 * wire.MaxLeaseBatch})
	ctx := ctxTimeout(t)
	conns := []*wire.Conn{dialRaw(t, addr), dialRaw(t, addr)}
	type answer struct {
		id   uint64
		code byte
		resp []byte
		err  error
	}
	answers := make(chan answer, 2*wire.MaxLeaseBatch)
	call := func(wc *wire.Conn, id uint64, payload []byte) {
		code, resp, err := wc.Call(ctx, wire.OpRenew, payload)
		answers <- answer{id, code, resp, err}
	}
	// Two lone renewals leave at once, two batches out (MaxInFlight 2).
	go call(conns[0], 1, renewal(1, "r-1"))
	go call(conns[1], 2, renewal(2, "r-2"))
	if a, b := <-up.sent, <-up.sent; a != 1 || b != 1 {
		t.Fatalf("the first two renewals left in batches of %d and %d; want 1 each, both out", a, b)
	}
	// Queued meanwhile: 600 small renewals. They leave as 512 and 88.
	const small = 600
	for i := range uint64(small) {
		go call(conns[i%2], 100+i, renewal(100+i, fmt.Sprint("r-", 100+i)))
	}
	waitFor(t, "600 renewals queued", func() bool { return r.Stats().Queued == small })
	up.hold <- struct{}{}
	up.hold <- struct{}{}
	if a, b := <-up.sent, <-up.sent; max(a, b) != wire.MaxLeaseBatch || min(a, b) != small-wire.MaxLeaseBatch { // (both out at once: either may arrive first)
		t.Errorf("600 queued renewals left in batches of %d and %d; want %d and %d", a, b, wire.MaxLeaseBatch, small-wire.MaxLeaseBatch)
	}
	// Queued while those are out: 3 renewals of 30 KiB each (a request
	// ID that long); two fit one client frame, the third leaves next.
	big := func(id uint64) []byte {
		return wire.EncodeLeaseRenew(wire.LeaseRenew{LeaseReport: wire.LeaseReport{Limit: "api", LeaseID: id, Epoch: 1, RequestID: strings.Repeat("x", 30<<10)}})
	}
	for i := range uint64(3) {
		go call(conns[i%2], 1000+i, big(1000+i))
	}
	waitFor(t, "3 large renewals queued", func() bool { return r.Stats().Queued == 3 })
	up.hold <- struct{}{}
	up.hold <- struct{}{}
	if a, b := <-up.sent, <-up.sent; max(a, b) != 2 || min(a, b) != 1 {
		t.Errorf("3 renewals of 30 KiB left in batches of %d and %d; want 2 and 1", a, b)
	}
	up.hold <- struct{}{}
	up.hold <- struct{}{}
	up.mu.Lock()
	for _, b := range up.batches {
		p, err := wire.EncodeLeaseBatch(b)
		if len(b) > wire.MaxLeaseBatch || err != nil || len(p) > wire.MaxClientPayload {
			t.Errorf("a batch of %d commands, %d bytes: %v", len(b), len(p), err)
		}
	}
	up.mu.Unlock()
	for range small + 5 {
		a := <-answers
		res, err := wire.DecodeLeaseResult(a.resp)
		if a.err != nil || a.code != wire.CodeOK || err != nil || res.LeaseID != a.id {
			t.Fatalf("renewal %d: code %d %+v, %v %v; want its own answer", a.id, a.code, res, a.err, err)
		}
	}
}

// TestRelayClosesAWorkerThatStopsReading: a worker that sends renewals
// and never reads their answers is closed once its answers no longer fit
// its connection's writer queue; meanwhile another worker's renewals are
// answered as usual (a batch's answers never wait for one worker's
// writer).
func TestRelayClosesAWorkerThatStopsReading(t *testing.T) {
	up := newFake()
	_, addr := startRelay(t, Config{Upstream: up})
	ctx := ctxTimeout(t)
	// The silent worker: a small receive buffer, so that the relay's
	// writes to it block soon.
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.(*net.TCPConn).SetReadBuffer(4096)
	bw := bufio.NewWriter(raw)
	if err := bw.WriteByte(wire.ClientPreface); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for id := uint64(1); id <= 200_000; id++ {
			_ = raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if wire.WriteFrame(bw, wire.Frame{ID: id, Kind: wire.OpRenew, Payload: renewal(id, fmt.Sprint("s-", id))}) != nil {
				return
			}
			if id%64 == 0 && bw.Flush() != nil {
				return // the relay closed the connection
			}
		}
	}()
	wc := dialRaw(t, addr)
	for i := range uint64(50) {
		code, _, err := wc.Call(ctx, wire.OpRenew, renewal(1_000_000+i, fmt.Sprint("w-", i)))
		if err != nil || code != wire.CodeOK {
			t.Fatalf("another worker's renewal %d while one stops reading: code %d, %v", i, code, err)
		}
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the worker that stopped reading was not closed")
	}
}
