package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// sidecarAnswer is a sidecar's reserve answer.
type sidecarAnswer struct {
	Granted      bool   `json:"granted"`
	RetryAfterNs int64  `json:"retry_after_ns"`
	Error        string `json:"error"`
}

// runLeased runs client id of the leased workload until ctx ends: reserve
// one permit from its sidecar (max_wait cfg.MaxWait), and when granted
// call the fake API at once, within LeasedMaxUseDelay of the reserve's
// invoke (else drop the grant). Every reserve and API call is in the
// history. A reserve that could not connect (nothing listened: the
// sidecar was down) certainly had no effect and is a fail; a lost answer
// is info.
func (w *Workers) runLeased(ctx context.Context, id int) error {
	f := w.fleet
	wl := w
	s := f.sidecars[id]
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(wl.cfg.Seed, uint64(id)+0x6c65))
	url := "http://" + s.HTTPAddr + "/v1/limits/" + f.limit + "/reserve"
	req := history.ReserveRequest{Limit: f.limit, Permits: 1, MaxWaitNanos: int64(wl.cfg.MaxWait)}
	backoff := func(lo, hi int) { _ = wait.Sleep(ctx, time.Duration(lo+rng.IntN(hi-lo+1))*time.Millisecond) }
	for seq := 0; seq < maxWorkerOps && ctx.Err() == nil; seq++ {
		wl.pool.PausePoint(ctx, id)
		if ctx.Err() != nil {
			break
		}
		reqID := fmt.Sprintf("%s-%d", s.Name, seq)
		body := fmt.Sprintf(`{"permits":1,"max_wait":%q,"request_id":%q}`, wl.cfg.MaxWait.String(), reqID)
		g0 := s.gen()
		inv, err := wl.hw.Invoke(id, s.Name, history.FReserve, reqID, req)
		if err != nil {
			return err
		}
		code, ans, rerr := postReserve(ctx, hc, url, body)
		g1 := s.gen()
		switch {
		case rerr != nil:
			typ := history.Info
			if errors.Is(rerr, syscall.ECONNREFUSED) {
				typ = history.Fail // nothing listened: certainly no effect
				wl.counters.failed.Add(1)
				wl.counters.notDelivered.Add(1)
			} else {
				wl.counters.unknown.Add(1)
			}
			if _, err := wl.hw.Complete(inv, typ, s.Name, reqID, history.ReserveResponse{Error: rerr.Error()}); err != nil {
				return err
			}
			backoff(50, 100)
			continue
		case code == http.StatusTooManyRequests:
			wl.counters.refused.Add(1)
			if _, err := wl.hw.Complete(inv, history.Fail, s.Name, reqID, history.ReserveResponse{RetryAfterNanos: max(ans.RetryAfterNs, 1)}); err != nil {
				return err
			}
			// Half to all of the sidecar's estimate of its next slot,
			// between 1 and 50 ms (0: unknown).
			back := min(max(ans.RetryAfterNs/int64(time.Millisecond), 2), 50)
			backoff(int(back/2), int(back))
			continue
		case code != http.StatusOK || !ans.Granted:
			wl.counters.failed.Add(1)
			msg := fmt.Sprintf("%d: %s", code, ans.Error)
			if code == http.StatusServiceUnavailable {
				f.failClosed.Add(1)
				if f.failClosedMsg.Load() == nil {
					f.failClosedMsg.Store(fmt.Sprintf("%s at %v: %s", s.Name, time.Since(f.start).Round(time.Millisecond), msg))
				}
			}
			if _, err := wl.hw.Complete(inv, history.Fail, s.Name, reqID, history.ReserveResponse{Error: msg}); err != nil {
				return err
			}
			backoff(50, 100)
			continue
		}
		wl.counters.granted.Add(1)
		wl.counters.permitsGranted.Add(1)
		comp, err := wl.hw.Complete(inv, history.OK, s.Name, reqID, history.ReserveResponse{Granted: true})
		if err != nil {
			return err
		}
		if g0 == g1 {
			s.addGrant(g0, comp.TimeNanos)
		}
		if err := wl.useLeasedGrant(ctx, id, s, reqID, inv); err != nil {
			return err
		}
	}
	return nil
}

// useLeasedGrant calls the fake API with the grant of reserve inv (request
// reqID) of sidecar s, at once, unless LeasedMaxUseDelay has passed since
// the reserve's invoke (then it drops the grant). It returns only history
// errors.
func (w *Workers) useLeasedGrant(ctx context.Context, id int, s *sidecar, reqID string, inv history.Op) error {
	w.pool.PausePoint(ctx, id)
	now := time.Now()
	sent := int64(now.Sub(w.start))
	if sent-inv.TimeNanos > int64(LeasedMaxUseDelay) {
		w.counters.skippedStale.Add(1)
		return nil
	}
	ainv, err := w.hw.Invoke(id, s.Name, history.FAPICall, reqID, history.APICallValue{Worker: s.Name})
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_, cerr := w.api.Call(actx, fakeapi.CallRequest{Worker: s.Name, RequestID: reqID, SentNanos: &sent})
	cancel()
	if cerr != nil {
		w.counters.apiErrors.Add(1)
		if _, err := w.hw.Complete(ainv, history.Info, s.Name, "", history.APICallValue{Worker: s.Name, Error: cerr.Error()}); err != nil {
			return err
		}
		return nil
	}
	w.counters.apiCalls.Add(1)
	if _, err := w.hw.Complete(ainv, history.OK, s.Name, "", history.APICallValue{Worker: s.Name, Status: 200}); err != nil {
		return err
	}
	return nil
}

// postReserve sends one reserve to a sidecar and decodes its answer.
func postReserve(ctx context.Context, hc *http.Client, url, body string) (int, sidecarAnswer, error) {
	var ans sidecarAnswer
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0, ans, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, ans, err
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		ans.Error = strings.TrimSpace(string(b))
	}
	return resp.StatusCode, ans, nil
}
