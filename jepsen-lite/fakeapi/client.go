package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client calls a fake API server.
type Client struct {
	base string
	hc   *http.Client
}

// NewUnixClient returns a Client for a server listening on the unix socket
// at socketPath.
func NewUnixClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &Client{base: "http://fakeapi", hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// CloseIdleConnections closes the client's idle keep-alive connections
// (call it before shutting the server down: a server waits for connections
// that never sent a request).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// NewClient returns a Client for baseURL (such as "http://127.0.0.1:8080")
// using hc (nil = a client with a 10 s timeout).
func NewClient(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{base: baseURL, hc: hc}
}

// Call records a call. It returns the call as the server stamped it.
func (c *Client) Call(ctx context.Context, req CallRequest) (Call, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Call{}, fmt.Errorf("fakeapi: encoding call: %w", err)
	}
	var out Call
	return out, c.do(ctx, http.MethodPost, "/call", body, &out)
}

// Calls returns every call the server recorded.
func (c *Client) Calls(ctx context.Context) ([]Call, error) {
	var out struct {
		Calls []Call `json:"calls"`
	}
	return out.Calls, c.do(ctx, http.MethodGet, "/calls", nil, &out)
}

// Stats returns the server's live counts.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	return out, c.do(ctx, http.MethodGet, "/stats", nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("fakeapi: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fakeapi: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("fakeapi: %s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("fakeapi: %s %s: status %d: %s", method, path, resp.StatusCode, e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("fakeapi: %s %s: decoding answer: %w", method, path, err)
	}
	return nil
}
