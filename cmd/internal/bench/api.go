package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// api.go: what bench asks of the cluster's HTTP API besides reserves: the
// limits it creates before a run, and the nodes' status (the leader and
// term before and after a run; overload's commit counters).

// benchHTTPClient sends requests over keep-alive connections (conns of
// them per server at most).
func benchHTTPClient(conns int, conf *tls.Config) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     conf,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// createLimit creates (or replaces) limit b.Limit, or with b.Keys the
// template of prefix b.Limit, on the first of servers that takes it,
// retrying for 15 s while none does (the cluster may still be electing);
// a 4xx answer is final.
func createLimit(ctx context.Context, hc *http.Client, servers []string, b Config) error {
	body, path := limitBody(b), "/v1/limits/"+b.Limit
	if b.Keys > 0 {
		body = strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"idle":%q,"max_keys":%d}`, b.KeyIdle.String(), b.Keys)
		path = "/v1/templates/" + b.Limit
	}
	var last error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			req, _ := http.NewRequestWithContext(ctx, "PUT", b.scheme()+s+path, strings.NewReader(body))
			if b.Token != "" {
				req.Header.Set("Authorization", "Bearer "+b.Token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				last = err
				continue
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = fmt.Errorf("PUT %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(msg))
			if resp.StatusCode/100 == 4 {
				return last
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("create limit: %w", last)
}

// limitBody is the configuration of the limit (or template) bench
// creates, as JSON.
func limitBody(b Config) string {
	body := fmt.Sprintf(`{"algorithm":%q,"rate":%v,"per":%q}`, b.Algorithm, b.Rate, b.Per.String())
	if b.Algorithm == "strict" {
		// An expiry of an hour: by default a strict permit expires half
		// an interval after its slot, which at the default rate is long
		// before any answer can be sent, and the register would refuse
		// every grant as expired.
		body = fmt.Sprintf(`{"algorithm":"strict","rate":%v,"per":%q,"max_reserved":1000000,"expiry":"1h"}`, b.Rate, b.Per.String())
	}
	if b.Algorithm == "warmup" {
		body = fmt.Sprintf(`{"algorithm":"warmup","rate":%v,"per":%q,"warmup":"1s"}`, b.Rate, b.Per.String())
	}
	return body
}

// scheme is the URL scheme of the servers.
func (b Config) scheme() string {
	if b.TLS != nil {
		return "https://"
	}
	return "http://"
}

// benchLeader returns the leader and term the first answering server
// reports ("" and 0 if none answers within a few seconds).
func benchLeader(ctx context.Context, hc *http.Client, servers []string, b Config) (string, uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, s := range servers {
		var st struct {
			LeaderID string `json:"leader_id"`
			Term     uint64 `json:"term"`
		}
		if err := getStatus(ctx, hc, s, b, &st); err == nil && st.LeaderID != "" {
			return st.LeaderID, st.Term
		}
	}
	return "", 0
}

// getStatus decodes server's GET /v1/status (with bench's scheme and
// token) into out; an answer other than 200 is an error.
func getStatus(ctx context.Context, hc *http.Client, server string, b Config, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", b.scheme()+server+"/v1/status", nil)
	if err != nil {
		return err
	}
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("decoding it: %w", err)
	}
	return nil
}

// limitNames are the limits a run reserves from: --limit, or with
// --limits N, --limit, --limit-2, ..., --limit-N.
func (b Config) limitNames() []string {
	names := []string{b.Limit}
	for k := 2; k <= b.Limits; k++ {
		names = append(names, b.Limit+"-"+strconv.Itoa(k))
	}
	return names
}

// keyName is the limit a reserve names: b.Limit, or with b.Keys a key
// b.Limit:k<i>, i drawn at random below b.Keys.
func (b Config) keyName() string {
	if b.Keys == 0 {
		return b.Limit
	}
	return b.Limit + ":k" + strconv.Itoa(rand.IntN(b.Keys))
}

// keyNames is keyName for a keyed run (each reserve draws its key), nil
// for a run on one limit (its name and path are built once).
func (b Config) keyNames() func() string {
	if b.Keys == 0 {
		return nil
	}
	return b.keyName
}

// multiPrefix is the start of a multi-limit reserve's body (up to its
// max_wait), or "" for single-limit reserves.
func (b Config) multiPrefix() string {
	if b.Limits == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(`{"limits":[`)
	for i, name := range b.limitNames() {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":%q,"permits":%d}`, name, b.Permits)
	}
	fmt.Fprintf(&sb, `],"settle_within":%q`, b.Settle.String())
	return sb.String()
}
