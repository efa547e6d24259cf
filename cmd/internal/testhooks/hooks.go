package testhooks

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
)

// WithClockHook serves GET /v1/debug/state and POST /v1/debug/clock {"offset_delta":"DURATION","rate":R}
// (testing only, behind --test-hooks): it jumps the node's clock by
// offset_delta and runs it at rate from then on. jepsen-lite's clock nemesis
// uses it.
func WithClockHook(next http.Handler, clock *node.SkewedClock, n *node.Node) http.Handler {
	mux := http.NewServeMux()
	// GET /v1/debug/state: the replica's applied index and state hash, for
	// jepsen-lite's durability checker (compare hashes at equal indexes).
	mux.HandleFunc("GET /v1/debug/state", func(w http.ResponseWriter, r *http.Request) {
		idx, h := n.StateHash()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"applied_index": idx, "state_hash": h})
	})
	// POST /v1/debug/snapshot: take a raft snapshot of this replica now
	// (jepsen-lite forces one after a reconfiguration, then restarts the
	// node from its data directory).
	mux.HandleFunc("POST /v1/debug/snapshot", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := n.Snapshot(); err != nil {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		idx, _ := n.StateHash()
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "applied_index": idx})
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

// faultsBody is the body of POST /v1/debug/faults and the answer of every
// /v1/debug/faults request.
type faultsBody struct {
	// Block lists raft addresses cut off both ways.
	Block []string `json:"block"`
	// BlockDial lists raft addresses this node may not dial (one-way).
	BlockDial []string `json:"block_dial"`
	// Loss is the probability that a write breaks its connection.
	Loss float64 `json:"loss"`
	// Delay and Jitter (Go durations) hold back every byte sent.
	Delay  string `json:"delay"`
	Jitter string `json:"jitter"`
}

// maxFaultPeers bounds the addresses of one faults request.
const maxFaultPeers = 64

// WithFaultHooks serves the fault layer's control endpoints (testing only,
// behind --test-hooks); jepsen-lite's partition and loss nemeses use them:
//
//	POST   /v1/debug/faults {"block":["RAFTADDR",...],"block_dial":[...],"loss":P,"delay":"5ms","jitter":"2ms"}
//	DELETE /v1/debug/faults   heal: no blocks, no loss, no delay
//	GET    /v1/debug/faults   the faults set now
//
// POST replaces the whole fault state (absent fields mean none), so
// sending the same body twice is harmless. See faultnet.TCPFaults for what
// each fault does to raft's connections.
func WithFaultHooks(next http.Handler, f *faultnet.TCPFaults) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter) {
		cur := f.Faults()
		writeHookJSON(w, http.StatusOK, faultsBody{Block: cur.Block, BlockDial: cur.BlockDial, Loss: cur.Loss, Delay: cur.Delay.String(), Jitter: cur.Jitter.String()})
	}
	mux.HandleFunc("GET /v1/debug/faults", func(w http.ResponseWriter, r *http.Request) { answer(w) })
	mux.HandleFunc("DELETE /v1/debug/faults", func(w http.ResponseWriter, r *http.Request) {
		f.Heal()
		answer(w)
	})
	mux.HandleFunc("POST /v1/debug/faults", func(w http.ResponseWriter, r *http.Request) {
		const want = `want {"block":["HOST:PORT",...],"block_dial":["HOST:PORT",...],"loss":0..1,"delay":"DURATION","jitter":"DURATION"}`
		var req faultsBody
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("body: %v (%s)", err, want)})
			return
		}
		if dec.More() {
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": "body: trailing data after the JSON object (" + want + ")"})
			return
		}
		if len(req.Block) > maxFaultPeers || len(req.BlockDial) > maxFaultPeers {
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("block: %d and block_dial: %d addresses; allowed: at most %d each", len(req.Block), len(req.BlockDial), maxFaultPeers)})
			return
		}
		bad := func(format string, args ...any) {
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(format, args...)})
		}
		// Validate everything, then change everything.
		var durs [2]time.Duration
		for i, fd := range []struct{ field, v string }{{"delay", req.Delay}, {"jitter", req.Jitter}} {
			if fd.v == "" {
				continue
			}
			d, err := time.ParseDuration(fd.v)
			if err != nil || d < 0 {
				bad("%s %q: want a Go duration >= 0 such as \"5ms\"", fd.field, fd.v)
				return
			}
			durs[i] = d
		}
		if !(req.Loss >= 0 && req.Loss <= 1) {
			bad("loss %v: want a probability in [0, 1]", req.Loss)
			return
		}
		for _, addr := range append(append([]string(nil), req.Block...), req.BlockDial...) {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				bad("peer %q: %v (want a raft address HOST:PORT)", addr, err)
				return
			}
		}
		for _, err := range []error{f.Block(req.Block), f.BlockDial(req.BlockDial), f.SetLoss(req.Loss), f.SetDelay(durs[0], durs[1])} {
			if err != nil { // cannot happen after the checks above
				writeHookJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
		}
		answer(w)
	})
	mux.Handle("/", next)
	return mux
}

func writeHookJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
