package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

func TestReserveRoundTrip(t *testing.T) {
	q := Reserve{Limit: "api", Permits: 3, MaxWaitNanos: 5e8, RequestID: "r-1"}
	got, err := DecodeReserve(EncodeReserve(q))
	if err != nil || got != q {
		t.Fatalf("DecodeReserve = %+v, %v; want %+v", got, err, q)
	}
	res := ReserveResult{Status: Granted, WaitNanos: 7, RetryAfterNanos: -1, ExpiresInNanos: 9, Duplicate: true, Detail: "d"}
	gr, err := DecodeReserveResult(EncodeReserveResult(res))
	if err != nil || gr != res {
		t.Fatalf("DecodeReserveResult = %+v, %v; want %+v", gr, err, res)
	}
}

// TestSessionResultRoundTrip: an opened session and a refused open
// travel whole; an opened session's answer is what it always was (ID and
// idle lifetime), and a refusal's fields are not optional.
func TestSessionResultRoundTrip(t *testing.T) {
	for _, res := range []SessionResult{{ID: 9, IdleNanos: 6e11}, {RetryAfterNanos: 5e9, Detail: "full"}} {
		got, err := DecodeSessionResult(EncodeSessionResult(res))
		if err != nil || got != res {
			t.Fatalf("DecodeSessionResult = %+v, %v; want %+v", got, err, res)
		}
	}
	var w Enc
	w.Uvar(9)
	w.Svar(6e11)
	if got := EncodeSessionResult(SessionResult{ID: 9, IdleNanos: 6e11}); !bytes.Equal(got, w.B) {
		t.Fatalf("an opened session encodes as %x, want %x", got, w.B)
	}
	refused := EncodeSessionResult(SessionResult{RetryAfterNanos: 5e9, Detail: "full"})
	for _, p := range [][]byte{refused[:2], append(bytes.Clone(w.B), 0)} {
		if _, err := DecodeSessionResult(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeSessionResult(%x) err = %v, want ErrMalformed", p, err)
		}
	}
}

func TestMalformedPayloadsAreErrors(t *testing.T) {
	good := EncodeReserve(Reserve{Limit: "api", Permits: 1})
	for name, p := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
		"huge len":  {0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		if _, err := DecodeReserve(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeReserve err = %v, want ErrMalformed", name, err)
		}
	}
	res := EncodeReserveResult(ReserveResult{Status: Granted})
	res[4] = 2 // the Duplicate flag must be 0 or 1
	if _, err := DecodeReserveResult(res); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad bool: err = %v, want ErrMalformed", err)
	}
}

func TestFrameLengthIsBounded(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := WriteFrame(w, Frame{ID: 1, Kind: OpReserve, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	f, err := ReadFrame(&buf)
	if err != nil || f.ID != 1 || f.Kind != OpReserve || string(f.Payload) != "x" {
		t.Fatalf("ReadFrame = %+v, %v", f, err)
	}
	for _, hdr := range [][]byte{
		{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 1},    // shorter than id+kind
		{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, // larger than MaxFrame
	} {
		if _, err := ReadFrame(bytes.NewReader(hdr)); !errors.Is(err, ErrMalformed) {
			t.Errorf("header %x: err = %v, want ErrMalformed", hdr[:4], err)
		}
	}
	big := Frame{ID: 2, Kind: OpReserve, Payload: make([]byte, MaxClientFrame)}
	buf.Reset()
	if err := WriteFrame(w, big); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if _, err := ReadFrameLimit(bytes.NewReader(buf.Bytes()), MaxClientFrame); !errors.Is(err, ErrMalformed) {
		t.Errorf("ReadFrameLimit of a frame over the limit: err = %v, want ErrMalformed", err)
	}
	if f, err := ReadFrame(bytes.NewReader(buf.Bytes())); err != nil || len(f.Payload) != MaxClientFrame {
		t.Errorf("ReadFrame of the same frame = %d bytes, %v", len(f.Payload), err)
	}
	if err := WriteFrame(w, Frame{Payload: make([]byte, MaxFrame)}); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized WriteFrame err = %v, want ErrMalformed", err)
	}
}

// echoServer answers every call with its own payload, out of order.
func echoServer(c net.Conn) {
	br := bufio.NewReader(c)
	w := NewWriter(c)
	defer w.Close()
	for {
		f, err := ReadFrame(br)
		if err != nil {
			return
		}
		go w.Send(Frame{ID: f.ID, Kind: CodeOK, Payload: f.Payload})
	}
}

func TestConnPairsConcurrentCalls(t *testing.T) {
	a, b := net.Pipe()
	go echoServer(b)
	c := NewConn(a)
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				want := []byte{byte(i), byte(j)}
				code, got, err := c.Call(context.Background(), OpReserve, want)
				if err != nil || code != CodeOK || !bytes.Equal(got, want) {
					t.Errorf("Call(%v) = %d %v %v", want, code, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestBrokenConnFailsPendingAndLaterCalls(t *testing.T) {
	a, b := net.Pipe()
	c := NewConn(a)
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.Call(context.Background(), OpReserve, nil)
		errc <- err
	}()
	// Read the call, then drop the connection without answering.
	if _, err := ReadFrame(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrBroken) {
			t.Fatalf("pending call err = %v, want ErrBroken", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pending call did not fail")
	}
	if !c.Broken() {
		t.Fatal("Broken() = false after a read error")
	}
	if _, _, err := c.Call(context.Background(), OpReserve, nil); !errors.Is(err, ErrBroken) {
		t.Fatalf("later call err = %v, want ErrBroken", err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go func() { // read and never answer
		br := bufio.NewReader(b)
		for {
			if _, err := ReadFrame(br); err != nil {
				return
			}
		}
	}()
	c := NewConn(a)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.Call(ctx, OpReserve, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// FuzzDecoders: no input makes the frame reader or a payload decoder panic.
func FuzzDecoders(f *testing.F) {
	f.Add(EncodeReserve(Reserve{Limit: "a", Permits: 1, RequestID: "x"}))
	f.Add(EncodeReserveResult(ReserveResult{Status: Refused, Detail: "d"}))
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1})
	batch, _ := EncodeLeaseBatch([]LeaseCall{{Op: OpRenew, Payload: EncodeLeaseRenew(LeaseRenew{LeaseReport: LeaseReport{Limit: "a", LeaseID: 1, Epoch: 1}})}})
	f.Add(batch)
	f.Add(EncodeLeaseBatchAnswers([]LeaseAnswer{{Code: CodeOK, Payload: []byte{1}}, {Code: CodeInvalid, Payload: []byte("bad")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeReserve(b)
		_, _ = DecodeReserveResult(b)
		if calls, err := DecodeLeaseBatch(b); err == nil {
			if len(calls) == 0 || len(calls) > MaxLeaseBatch {
				t.Fatalf("DecodeLeaseBatch accepted %d commands", len(calls))
			}
			for _, c := range calls {
				if !isLeaseOp(c.Op) {
					t.Fatalf("DecodeLeaseBatch accepted operation %d", c.Op)
				}
			}
		} else if !errors.Is(err, ErrLeaseBatch) {
			t.Fatalf("DecodeLeaseBatch error %v does not wrap ErrLeaseBatch", err)
		}
		for want := range 3 {
			if _, err := DecodeLeaseBatchAnswers(b, want); err != nil && !errors.Is(err, ErrLeaseBatch) {
				t.Fatalf("DecodeLeaseBatchAnswers error %v does not wrap ErrLeaseBatch", err)
			}
		}
		r := bytes.NewReader(b)
		for {
			if _, err := ReadFrame(r); err != nil {
				return
			}
		}
	})
}

// writeCounter counts the Write calls made on a connection.
type writeCounter struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func TestSendAllFramesShareOneWrite(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	counted := &writeCounter{Conn: a}
	w := NewWriter(counted)
	fs := make([]Frame, 50)
	for i := range fs {
		fs[i] = Frame{ID: uint64(i + 1), Kind: CodeOverloaded, Payload: []byte("full")}
	}
	if !w.SendAll(fs) {
		t.Fatal("SendAll on a running writer = false")
	}
	br := bufio.NewReader(b)
	for i := range fs {
		if f, err := ReadFrame(br); err != nil || f.ID != uint64(i+1) || f.Kind != CodeOverloaded {
			t.Fatalf("frame %d read as %+v, %v", i+1, f, err)
		}
	}
	counted.mu.Lock()
	writes := counted.writes
	counted.mu.Unlock()
	if writes != 1 {
		t.Errorf("%d frames queued together took %d writes; want 1", len(fs), writes)
	}
	w.Close()
	if w.SendAll(fs) {
		t.Error("SendAll on a closed writer = true; want false")
	}
}

func TestFrameBufferedOnlyWhenAWholeFrameIs(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	if err := WriteFrame(bw, Frame{ID: 1, Kind: OpReserve, Payload: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	whole := buf.Bytes()
	for cut := 0; cut <= len(whole); cut++ {
		br := bufio.NewReader(io.MultiReader(bytes.NewReader(whole[:cut]), blockingReader{}))
		if cut > 0 {
			br.Peek(cut) // buffer what has arrived, as a read loop has
		}
		if got, want := FrameBuffered(br), cut == len(whole); got != want {
			t.Errorf("%d of %d bytes buffered: FrameBuffered = %v, want %v", cut, len(whole), got, want)
		}
	}
	// A length no frame can have: reading it fails at once, so it counts
	// as whole.
	br := bufio.NewReader(io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 3}), blockingReader{}))
	br.Peek(4)
	if !FrameBuffered(br) {
		t.Error("FrameBuffered of a malformed length = false, want true (reading it does not wait)")
	}
}

// blockingReader stands for a peer that has sent nothing more: a read
// from it would wait, so a test must never reach it.
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { panic("read past what had arrived") }

func TestYieldingWriterLetsFramesOnTheirWayJoinTheFlush(t *testing.T) {
	// When the writer asks, busy sends a second frame from another
	// goroutine and reports it on its way (waiting until it is queued,
	// only to make the order certain): both share one write.
	a, b := net.Pipe()
	defer b.Close()
	counted := &writeCounter{Conn: a}
	var w *Writer
	var once sync.Once
	asked, second := make(chan struct{}), make(chan struct{})
	busy := func() bool {
		fresh := false
		once.Do(func() {
			fresh = true
			close(asked)
			go func() { w.Send(Frame{ID: 2, Kind: CodeOK}); close(second) }()
		})
		<-second
		return fresh
	}
	w = NewYieldingWriter(counted, busy)
	defer w.Close()
	w.Send(Frame{ID: 1, Kind: CodeOK})
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never asked busy before flushing")
	}
	br := bufio.NewReader(b)
	for id := uint64(1); id <= 2; id++ {
		if f, err := ReadFrame(br); err != nil || f.ID != id {
			t.Fatalf("frame %d read as %+v, %v", id, f, err)
		}
	}
	counted.mu.Lock()
	writes := counted.writes
	counted.mu.Unlock()
	if writes != 1 {
		t.Errorf("a frame on its way when the writer asked took %d writes with the first; want 1", writes)
	}
}

// memConn is a connection whose writes land in a buffer at once (or fail,
// when failWrites is set); only what a Writer uses is implemented.
type memConn struct {
	net.Conn
	mu         sync.Mutex
	buf        bytes.Buffer
	writes     int
	closed     bool
	failWrites bool
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.failWrites || c.closed {
		return 0, errors.New("memConn: write failed")
	}
	return c.buf.Write(p)
}

func (c *memConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// frames decodes what was written so far.
func (c *memConn) frames(t *testing.T) []Frame {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Frame
	r := bytes.NewReader(c.buf.Bytes())
	for r.Len() > 0 {
		f, err := ReadFrame(r)
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		out = append(out, f)
	}
	return out
}

func TestSendNowWritesAtOnceOnAnIdleWriter(t *testing.T) {
	c := &memConn{}
	w := NewWriter(c)
	if !w.SendNow(Frame{ID: 7, Kind: CodeOK, Payload: []byte("granted")}) {
		t.Fatal("SendNow on a running writer = false")
	}
	// Written and flushed before SendNow returned: not left to the
	// writer's goroutine.
	if fs := c.frames(t); len(fs) != 1 || fs[0].ID != 7 || string(fs[0].Payload) != "granted" {
		t.Fatalf("after SendNow returned, the connection holds %+v; want frame 7", fs)
	}
	w.Close()
	if w.SendNow(Frame{ID: 8, Kind: CodeOK}) {
		t.Error("SendNow on a closed writer = true; want false")
	}
}

func TestSendNowFailureClosesTheConnection(t *testing.T) {
	c := &memConn{failWrites: true}
	w := NewWriter(c)
	defer w.Close()
	if w.SendNow(Frame{ID: 1, Kind: CodeOK}) {
		t.Fatal("SendNow whose write failed = true; want false")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		t.Error("a failed SendNow left the connection open")
	}
}

func TestSendNowAndSendTogetherDeliverEveryFrameWhole(t *testing.T) {
	// Goroutines answering at once, some writing directly and some
	// through the writer: every frame arrives once and intact (run under
	// -race: the buffer is never written by two goroutines at a time).
	c := &memConn{}
	w := NewYieldingWriter(c, func() bool { return true })
	const senders, each = 8, 200
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				f := Frame{ID: uint64(s*each + i + 1), Kind: CodeOK, Payload: bytes.Repeat([]byte{byte(s)}, 1+i%64)}
				if i%2 == 0 {
					w.SendNow(f)
				} else {
					w.Send(f)
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	seen := make(map[uint64]bool)
	for _, f := range c.frames(t) {
		s, i := int(f.ID-1)/each, int(f.ID-1)%each
		if seen[f.ID] || !bytes.Equal(f.Payload, bytes.Repeat([]byte{byte(s)}, 1+i%64)) {
			t.Fatalf("frame %d repeated or damaged: %q", f.ID, f.Payload)
		}
		seen[f.ID] = true
	}
	if len(seen) != senders*each {
		t.Fatalf("%d frames arrived; want %d", len(seen), senders*each)
	}
}

// TestTrySendNeverWaits: to a peer that does not read, TrySend queues
// until the writer's queue is full and then refuses at once, where Send
// would wait; after Close it refuses too.
func TestTrySendNeverWaits(t *testing.T) {
	a, b := net.Pipe() // b never reads: the writer's first write blocks
	defer b.Close()
	w := NewWriter(a)
	f := Frame{ID: 1, Kind: CodeOK, Payload: make([]byte, 1024)}
	accepted := 0
	for range 2 * WriterQueue {
		if w.TrySend(f) {
			accepted++
		}
	}
	// The writer takes what fits its 64 KiB buffer (about 64 frames of
	// this size) before its write blocks; the queue holds WriterQueue
	// more; the rest are refused.
	if accepted < WriterQueue || accepted >= 2*WriterQueue {
		t.Errorf("TrySend accepted %d of %d frames for a peer that does not read; want the queue's %d and what the writer's buffer holds", accepted, 2*WriterQueue, WriterQueue)
	}
	a.Close()
	w.Close()
	if w.TrySend(f) {
		t.Error("TrySend on a closed writer = true; want false")
	}
}
