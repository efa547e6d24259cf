package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

const (
	maxBodyBytes   = 4 << 10
	maxWorkerBytes = 256
	maxIDBytes     = 256
)

// ErrFull is returned by Record once Config.MaxCalls calls are kept.
var ErrFull = errors.New("fakeapi: call log full")

// Server is the fake third-party API.
type Server struct {
	cfg  Config
	http *http.Server

	mu      sync.Mutex
	calls   []Call
	mon     *monitor
	keyed   *keyedMonitor // Keyed mode
	multi   *MultiJudge   // Multi mode
	dropped int64
}

// New returns a Server for cfg. It serves nothing until Serve.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mon: newMonitor(cfg)}
	if cfg.Mode == Keyed {
		s.keyed = newKeyedMonitor(cfg)
	}
	if cfg.Mode == Multi {
		j, err := NewMultiJudge(cfg.Multi)
		if err != nil {
			return nil, err
		}
		s.multi = j
	}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// Now returns the server's clock: monotonic ns since Config.Start.
func (s *Server) Now() int64 { return int64(time.Since(s.cfg.Start)) }

// Record stamps and keeps a call from worker spending requestID (sent at
// sentNanos in the worker's time base, if not nil). In-process workers may
// call it directly; see RecordCall for a call that names its permit.
func (s *Server) Record(worker, requestID string, sentNanos *int64) (Call, error) {
	return s.RecordCall(CallRequest{Worker: worker, RequestID: requestID, SentNanos: sentNanos})
}

// RecordCall stamps and keeps the call req describes. The HTTP handler
// calls it.
func (s *Server) RecordCall(req CallRequest) (Call, error) {
	worker, requestID, sentNanos := req.Worker, req.RequestID, req.SentNanos
	if err := checkCall(worker, requestID); err != nil {
		return Call{}, err
	}
	if req.Permit != nil && *req.Permit < 0 {
		return Call{}, fmt.Errorf("%w: permit %d; allowed: >= 0 (0-based index of the permit in its grant)", ErrInvalid, *req.Permit)
	}
	if err := s.checkMultiCall(req); err != nil {
		return Call{}, err
	}
	if len(req.Key) > maxIDBytes || (s.cfg.Mode == Keyed) != (req.Key != "") {
		return Call{}, fmt.Errorf("%w: key %q in mode %s; allowed: 1 to %d bytes in mode %s, none in the others", ErrInvalid, req.Key, s.cfg.Mode, maxIDBytes, Keyed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) >= s.cfg.MaxCalls {
		s.dropped++
		return Call{}, fmt.Errorf("%w: %d calls kept; allowed: at most Config.MaxCalls = %d", ErrFull, len(s.calls), s.cfg.MaxCalls)
	}
	c := Call{Seq: int64(len(s.calls)), Worker: worker, RequestID: requestID, TimeNanos: s.Now(), Key: req.Key}
	if sentNanos != nil {
		v := *sentNanos
		c.SentNanos = &v
	}
	if req.Permit != nil {
		v := *req.Permit
		c.Permit = &v
	}
	if n := len(s.calls); n > 0 && c.TimeNanos < s.calls[n-1].TimeNanos {
		c.TimeNanos = s.calls[n-1].TimeNanos // a Start without a monotonic reading
	}
	if req.Tokens != nil {
		v := *req.Tokens
		c.Tokens = &v
	}
	if req.DurationNanos != nil {
		v := *req.DurationNanos
		c.DurationNanos = &v
	}
	s.calls = append(s.calls, c)
	if s.multi != nil {
		var tokens int64
		if c.Tokens != nil {
			tokens = *c.Tokens
		}
		s.multi.Start(c.TimeNanos, tokens)
		return c, nil
	}
	if s.keyed != nil {
		s.keyed.observe(c.Key, c.TimeNanos)
		return c, nil
	}
	s.mon.observe(c.TimeNanos)
	return c, nil
}

func checkCall(worker, requestID string) error {
	if worker == "" || len(worker) > maxWorkerBytes {
		return fmt.Errorf("%w: worker %q; allowed: 1 to %d bytes", ErrInvalid, worker, maxWorkerBytes)
	}
	if len(requestID) > maxIDBytes {
		return fmt.Errorf("%w: request_id of %d bytes; allowed: at most %d", ErrInvalid, len(requestID), maxIDBytes)
	}
	return nil
}

// Calls returns a copy of every call recorded, in sequence order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.calls)
	for i := range out {
		if p := out[i].SentNanos; p != nil {
			v := *p
			out[i].SentNanos = &v
		}
		if p := out[i].Permit; p != nil {
			v := *p
			out[i].Permit = &v
		}
		for _, pp := range []**int64{&out[i].Tokens, &out[i].DurationNanos, &out[i].EndNanos} {
			if *pp != nil {
				v := **pp
				*pp = &v
			}
		}
	}
	return out
}

// Stats returns the live monitor's counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mon.stats()
	if s.keyed != nil {
		st = s.keyed.stats()
	}
	if s.multi != nil {
		ms := s.multi.Stats()
		st = Stats{Mode: Multi, Calls: ms.Calls, Violations: ms.Violations(), MinGapNanos: ms.MinGapNanos, Multi: &ms}
	}
	st.Dropped = s.dropped
	return st
}

// Handler returns the HTTP handler (POST /call, GET /calls, GET /stats).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call", s.handleCall)
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Calls []Call `json:"calls"`
		}{s.Calls()})
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	return mux
}

func (s *Server) handleCall(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("fakeapi: reading body: %v; allowed: at most %d bytes", err, maxBodyBytes))
		return
	}
	var req CallRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`fakeapi: body: %v; allowed: {"worker":string,"request_id":string,"sent_ns":int,"permit":int,"tokens":int,"duration_ns":int,"key":string}`, err))
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "fakeapi: trailing data after the JSON object; allowed: exactly one object")
		return
	}
	c, err := s.RecordCall(req)
	if err == nil && c.DurationNanos != nil {
		c = s.endCall(r.Context(), c)
	}
	switch {
	case errors.Is(err, ErrFull):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeJSON(w, http.StatusOK, c)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

// Serve serves the API on l until Shutdown. It returns nil after Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if err := s.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakeapi: serving on %s: %w", l.Addr(), err)
	}
	return nil
}

// Shutdown stops serving, waiting for calls in flight until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.http.Shutdown(ctx); err != nil {
		return fmt.Errorf("fakeapi: shutdown: %w", err)
	}
	return nil
}

// ListenUnix listens on the unix socket at path, removing a stale socket
// file left by an earlier run.
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("fakeapi: removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fakeapi: %w", err)
	}
	return l, nil
}

// ListenLoopback listens on 127.0.0.1 at an ephemeral port.
func ListenLoopback() (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeapi: %w", err)
	}
	return l, nil
}
