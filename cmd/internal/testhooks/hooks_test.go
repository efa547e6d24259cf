package testhooks

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/node/faultnet"
)

func TestFaultHooks(t *testing.T) {
	f := faultnet.NewTCP("127.0.0.1:7001")
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ts := httptest.NewServer(WithFaultHooks(next, f))
	defer ts.Close()
	tests := []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"set", "POST", `{"block":["127.0.0.1:7002"],"block_dial":["127.0.0.1:7003"],"loss":0.25,"delay":"5ms","jitter":"2ms"}`, 200,
			`{"block":["127.0.0.1:7002"],"block_dial":["127.0.0.1:7003"],"loss":0.25,"delay":"5ms","jitter":"2ms"}`},
		{"get", "GET", ``, 200, `"block":["127.0.0.1:7002"]`},
		{"bad loss", "POST", `{"loss":2}`, 400, "probability"},
		{"bad delay", "POST", `{"delay":"-1s"}`, 400, "duration"},
		{"bad peer", "POST", `{"block":["nope"]}`, 400, "HOST:PORT"},
		{"unknown field", "POST", `{"blocks":[]}`, 400, "unknown field"},
		{"trailing", "POST", `{}{}`, 400, "trailing"},
		{"bad request changed nothing", "GET", ``, 200, `"loss":0.25`},
		{"replace", "POST", `{"loss":0.5}`, 200, `{"block":[],"block_dial":[],"loss":0.5,"delay":"0s","jitter":"0s"}`},
		{"heal", "DELETE", ``, 200, `{"block":[],"block_dial":[],"loss":0,"delay":"0s","jitter":"0s"}`},
		{"other paths pass through", "GET", ``, 418, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/debug/faults"
			if tt.code == 418 {
				path = "/v1/status"
			}
			req, err := http.NewRequest(tt.method, ts.URL+path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.want) {
				t.Fatalf("%d %s; want %d containing %s", resp.StatusCode, b, tt.code, tt.want)
			}
		})
	}
	if got := f.Faults(); got.Loss != 0 || got.Delay != 0 || got.Jitter != 0*time.Millisecond || len(got.Block) != 0 {
		t.Fatalf("after DELETE: %+v", got)
	}
}
