package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sidecarLoad is closed-loop reserve load on sidecars: callers per
// sidecar, each reserving one permit at a time (max_wait 100 ms), at most
// maxSidecarReserves each, until stopped.
type sidecarLoad struct {
	// granted counts the grants per sidecar; other the answers that are
	// neither 200 nor a 429 with a retry time (each logged).
	granted []atomic.Int64
	other   atomic.Int64
	start   time.Time
	stopCh  chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	end     time.Time // the latest answer
}

// maxSidecarReserves bounds one caller's reserves.
const maxSidecarReserves = 200_000

// startSidecarLoad starts callers closed loops per sidecar on limit;
// request IDs start with prefix.
func startSidecarLoad(t *testing.T, hc *http.Client, sidecars []string, limit, prefix string, callers int) *sidecarLoad {
	l := &sidecarLoad{granted: make([]atomic.Int64, len(sidecars)), start: time.Now(), stopCh: make(chan struct{})}
	l.end = l.start
	for i, s := range sidecars {
		for c := range callers {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for k := range maxSidecarReserves {
					select {
					case <-l.stopCh:
						return
					default:
					}
					code, resp := doQuiet(hc, "POST", "http://"+s+"/v1/limits/"+limit+"/reserve",
						fmt.Sprintf(`{"permits":1,"max_wait":"100ms","request_id":"%s%d-%d-%d"}`, prefix, i, c, k))
					now := time.Now()
					l.mu.Lock()
					if now.After(l.end) {
						l.end = now
					}
					l.mu.Unlock()
					switch code {
					case 200:
						l.granted[i].Add(1)
					case 429:
						// A refusal says when to come back: never 0, which
						// would invite a hot retry loop.
						var a struct {
							RetryAfterNs int64 `json:"retry_after_ns"`
						}
						if json.Unmarshal(resp, &a) != nil || a.RetryAfterNs < int64(time.Millisecond) {
							l.other.Add(1)
							t.Logf("sidecar %s refused without a retry time: %s", s, resp)
						}
					default:
						l.other.Add(1)
						t.Logf("sidecar %s answered %d %s", s, code, resp)
						time.Sleep(10 * time.Millisecond) // do not spin on a failing sidecar
					}
				}
			}()
		}
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the load and waits for its callers (once).
func (l *sidecarLoad) stop() {
	l.stopped.Do(func() {
		close(l.stopCh)
		l.wg.Wait()
	})
}

// total is the grants through every sidecar.
func (l *sidecarLoad) total() int64 {
	var n int64
	for i := range l.granted {
		n += l.granted[i].Load()
	}
	return n
}

// window is the load's span, from its start to its latest answer.
func (l *sidecarLoad) window() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end.Sub(l.start)
}
