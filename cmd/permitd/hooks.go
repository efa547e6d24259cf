package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/permitd/permitd/node"
)

// withClockHook serves GET /v1/debug/state and POST /v1/debug/clock {"offset_delta":"DURATION","rate":R}
// (testing only, behind --test-hooks): it jumps the node's clock by
// offset_delta and runs it at rate from then on. jepsen-lite's clock nemesis
// uses it.
func withClockHook(next http.Handler, clock *node.SkewedClock, n *node.Node) http.Handler {
	mux := http.NewServeMux()
	// GET /v1/debug/state: the replica's applied index and state hash, for
	// jepsen-lite's durability checker (compare hashes at equal indexes).
	mux.HandleFunc("GET /v1/debug/state", func(w http.ResponseWriter, r *http.Request) {
		idx, h := n.StateHash()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"applied_index": idx, "state_hash": h})
	})
	mux.HandleFunc("POST /v1/debug/clock", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			OffsetDelta string  `json:"offset_delta"`
			Rate        float64 `json:"rate"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		w.Header().Set("Content-Type", "application/json")
		if err := dec.Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("body: %v (want {\"offset_delta\":\"DURATION\",\"rate\":R})", err)})
			return
		}
		var delta time.Duration
		if req.OffsetDelta != "" {
			d, err := time.ParseDuration(req.OffsetDelta)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("offset_delta: %v (want a Go duration)", err)})
				return
			}
			delta = d
		}
		if req.Rate == 0 {
			req.Rate = 1
		}
		if err := clock.Set(delta, req.Rate); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "now_ns": clock.NowNanos()})
	})
	mux.Handle("/", next)
	return mux
}

// withPprof serves Go's profiler under /debug/pprof/ (behind --pprof).
func withPprof(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", next)
	return mux
}
