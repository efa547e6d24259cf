package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// nethttpside.go: the nethttp peer, the ceiling of any API served by Go's
// net/http on this machine. A child process (this program again, with
// serveCeilingArg) runs a net/http server whose handler reads the body
// and answers every reserve with a constant grant, deciding nothing; the
// load generator sends it exactly what the http side sends permitd, on
// the same keep-alive HTTP/1.1 client. Its throughput is what permitd's
// HTTP side could reach if deciding, replicating and fsyncing cost
// nothing: HTTP / nethttp is the share of net/http's own ceiling permitd
// reaches, and nethttp / Redis says whether a net/http server could match
// Redis here at all.

// serveCeilingArg, as the first argument, makes this program the nethttp
// peer's server on the address that follows (started by startCeiling).
const serveCeilingArg = "-serve-nethttp-ceiling"

// ceilingAnswer is the ceiling server's answer to every request: a grant,
// shaped as permitd's.
const ceilingAnswer = `{"granted":true,"wait_ns":0,"expires_in_ns":60000000000,"spacing_ns":1,"duplicate":false}` + "\n"

// serveCeiling runs the ceiling server on addr with the server timeouts
// permitd's API sets (transport/server.NewHTTPServer), until the process
// is stopped.
func serveCeiling(addr string) error {
	answer := []byte(ceilingAnswer)
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20))
			w.Header()["Content-Type"] = []string{"application/json"}
			_, _ = w.Write(answer)
		}),
	}
	err := srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("compare-redis: nethttp ceiling: %w", err)
}

// ceilingServer is the running ceiling server.
type ceilingServer struct {
	addr string
	proc *child
}

// startCeiling starts the ceiling server (this executable with
// serveCeilingArg) on a free loopback port and waits until it answers.
func startCeiling(ctx context.Context, sup *supervisor, dir string) (*ceilingServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("compare-redis: nethttp ceiling: %w", err)
	}
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	proc, err := sup.start("nethttp ceiling", filepath.Join(dir, "nethttp.log"), self, serveCeilingArg, addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return &ceilingServer{addr: addr, proc: proc}, nil
		}
		if !proc.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("compare-redis: nethttp ceiling on %s did not start: %v\n%s", addr, err, proc.logTail(2000))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
