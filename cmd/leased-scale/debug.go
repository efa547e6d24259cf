package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// debug.go: Go's profiler for the measuring process itself (-debug-addr),
// which hosts every in-process worker of the sweep: where its two cores
// and its memory go is what limits the sweep at a thousand workers.

// checkDebugAddr accepts only host:port with a loopback host: the
// profiler must not be reachable from outside the machine.
func checkDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-debug-addr %q: want host:port on loopback: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-debug-addr %q: want a loopback host (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// serveDebug serves /debug/pprof/ on addr, which must be a loopback
// address, until the process exits.
func serveDebug(addr string) error {
	if err := checkDebugAddr(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go http.Serve(ln, mux) //nolint:errcheck // ends with the process
	return nil
}
