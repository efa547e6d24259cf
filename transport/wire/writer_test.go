package wire

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// countingConn is a net.Conn that keeps what is written to it and counts
// the Write calls; only the writer's methods are implemented.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }
func (c *countingConn) Close() error                     { return nil }

// frames reads back every frame written to c.
func (c *countingConn) frames(t *testing.T) []Frame {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Frame
	r := bytes.NewReader(c.buf.Bytes())
	for r.Len() > 0 {
		f, err := ReadFrameLimit(r, MaxFrame)
		if err != nil {
			t.Fatalf("frame %d: %v", len(out), err)
		}
		out = append(out, f)
	}
	return out
}

// TestLingeringWriterSharesOneWrite: frames queued 100 µs apart leave in
// one write each, at once, unless the writer was asked to linger; then
// the ones within lingerNanos of the first share one write, in order,
// and a frame after the linger leaves at once again.
func TestLingeringWriterSharesOneWrite(t *testing.T) {
	for _, linger := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c := &countingConn{}
			w := NewWriter(c)
			const spaced = 4 // frames 100 µs apart: 300 µs, within the linger
			for i := range spaced {
				if linger && i == 0 {
					w.Linger()
				}
				w.Send(Frame{ID: uint64(i), Kind: CodeOverloaded, Payload: []byte("busy")})
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(time.Duration(lingerNanos))
			synctest.Wait()
			c.mu.Lock()
			lingered := c.writes
			c.mu.Unlock()
			w.Send(Frame{ID: spaced, Kind: CodeOK})
			synctest.Wait()
			w.Close()
			want := spaced
			if linger {
				want = 1
			}
			if lingered != want {
				t.Errorf("linger %v: %d frames 100 µs apart took %d writes, want %d", linger, spaced, lingered, want)
			}
			if c.writes != lingered+1 {
				t.Errorf("linger %v: the frame after took %d writes, want 1 (a linger lasts one flush)", linger, c.writes-lingered)
			}
			for i, f := range c.frames(t) {
				if f.ID != uint64(i) {
					t.Fatalf("linger %v: frame %d has ID %d: out of order", linger, i, f.ID)
				}
			}
		})
	}
}
