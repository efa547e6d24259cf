package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/permitd/permitd/fsm"
)

// discardWriter is a reusable http.ResponseWriter that keeps only the code.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkReserveHandler measures the handler's own cost per reserve (the
// store answers a constant grant): routing, body decoding, validation,
// metrics and response encoding.
func BenchmarkReserveHandler(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"fast", `{"permits":1,"max_wait":"250ms","request_id":"0123456789abcdef0123456789abcdef"}`},
		{"empty", ``},
		{"slowpath", `{"Permits":1,"max_wait":"250ms","request_id":"0123456789abcdef0123456789abcdef"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, HandlerOptions{})
			e.store.SetReserveFunc(func(context.Context, fsm.Reserve) (fsm.ReserveResult, error) {
				return fsm.ReserveResult{Status: fsm.Granted, WaitNanos: 12345}, nil
			})
			req := httptest.NewRequest("POST", "/v1/limits/api.token/reserve", nil)
			body := strings.NewReader(bc.body)
			w := &discardWriter{h: make(http.Header)}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(bc.body)
				req.Body = readCloser{body}
				req.ContentLength = int64(len(bc.body))
				clear(w.h)
				e.h.ServeHTTP(w, req)
				if w.code != http.StatusOK {
					b.Fatalf("code %d", w.code)
				}
			}
		})
	}
}

// BenchmarkReserveHandlerParallel runs the same on all cores.
func BenchmarkReserveHandlerParallel(b *testing.B) {
	e := newEnv(b, HandlerOptions{})
	e.store.SetReserveFunc(func(context.Context, fsm.Reserve) (fsm.ReserveResult, error) {
		return fsm.ReserveResult{Status: fsm.Granted, WaitNanos: 12345}, nil
	})
	const payload = `{"permits":1,"max_wait":"250ms","request_id":"0123456789abcdef0123456789abcdef"}`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("POST", "/v1/limits/api.token/reserve", nil)
		body := strings.NewReader(payload)
		w := &discardWriter{h: make(http.Header)}
		for pb.Next() {
			body.Reset(payload)
			req.Body = readCloser{body}
			req.ContentLength = int64(len(payload))
			clear(w.h)
			e.h.ServeHTTP(w, req)
		}
	})
}
