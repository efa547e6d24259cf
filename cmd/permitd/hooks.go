package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/permitd/permitd/node"
)

// withClockHook serves POST /v1/debug/clock {"offset_delta":"DURATION","rate":R}
// (testing only, behind --test-hooks): it jumps the node's clock by
// offset_delta and runs it at rate from then on. jepsen-lite's clock nemesis
// uses it.
func withClockHook(next http.Handler, clock *node.SkewedClock) http.Handler {
	mux := http.NewServeMux()
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
