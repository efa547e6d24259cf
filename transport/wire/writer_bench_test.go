package wire

import (
	"bufio"
	"net"
	"testing"
)

// BenchmarkLoneAnswer: one frame at a time over loopback TCP, the next
// sent only once the peer has read the previous one (a worker's renewal
// and its answer, seen from the node): through the writer's goroutine
// (Send) against written by the sender (SendNow). The difference is the
// writer's wake-up per frame.
func BenchmarkLoneAnswer(b *testing.B) {
	for _, tc := range []struct {
		name string
		send func(w *Writer, f Frame) bool
	}{
		{"Send", (*Writer).Send},
		{"SendNow", (*Writer).SendNow},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					close(accepted)
					return
				}
				accepted <- c
			}()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			server, ok := <-accepted
			if !ok {
				b.Fatal("accept failed")
			}
			w := NewWriter(server)
			defer w.Close()
			br := bufio.NewReader(client)
			payload := make([]byte, 48) // about a lease answer
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if !tc.send(w, Frame{ID: uint64(i), Kind: CodeOK, Payload: payload}) {
					b.Fatal("writer stopped")
				}
				if _, err := ReadFrame(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
