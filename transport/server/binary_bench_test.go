package server

import (
	"context"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// BenchmarkBinaryReservePipelined measures one reserve through a
// one-node register's binary protocol with 512 calls in flight on one
// connection, as `permitd bench --protocol binary --concurrency 512`
// loads a leader: the call loop (node.ServeCalls), the node's reserve
// path, the batcher, raft (raft-boltdb, fsync on) and the answer's
// writer, plus the client's side of the connection. ns/op is the
// process's time per reserve, allocs/op what one costs the heap.
func BenchmarkBinaryReservePipelined(b *testing.B) {
	c := newTestCluster(b, 1)
	l := c.leader()
	ctx := context.Background()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1e9, Per: time.Second, Expiry: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "bench", Config: cfg}); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			var preface [1]byte
			if _, err := s.Read(preface[:]); err != nil {
				s.Close()
				continue
			}
			go NewBinary(l).Serve(s)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Write([]byte{wire.ClientPreface}); err != nil {
		b.Fatal(err)
	}
	bc := wire.NewConn(conn)
	defer bc.Close()
	payload := wire.EncodeReserve(wire.Reserve{Limit: "bench", Permits: 1})
	b.SetParallelism(max(1, 512/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			code, p, err := bc.Call(ctx, wire.OpReserve, payload)
			if err != nil || code != wire.CodeOK {
				b.Errorf("reserve: code %d (%s), %v", code, p, err)
				return
			}
		}
	})
	b.StopTimer()
	// The process's CPU per reserve: on a shared machine a truer
	// measure than the elapsed time.
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
