package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// StatusError is an answer outside 2xx.
type StatusError struct {
	// Code is the HTTP status, Body the answer's text.
	Code int
	Body string
}

// Error renders the status and the answer's text.
func (e *StatusError) Error() string { return fmt.Sprintf("status %d: %s", e.Code, e.Body) }

// Code returns the HTTP status of err's answer, or 0 when err is not a
// non-2xx answer (no answer at all, for example).
func Code(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// maxBody bounds the answers read.
const maxBody = 8 << 20

// Client sends requests to one kind of process: plain HTTP without a
// token (the zero value but HC), or, for the agents of a secure run, HTTPS
// with a bearer token.
type Client struct {
	// HC sends the requests; with HTTPS its transport holds the TLS
	// configuration (the run's CA).
	HC *http.Client
	// HTTPS: the processes serve TLS; requests go to https://addr/path.
	HTTPS bool
	// Token, if not empty, is sent as "Authorization: Bearer TOKEN".
	Token string
}

// Do sends method http://addr/path with hc, without a token (see
// Client.Do).
func Do(ctx context.Context, hc *http.Client, who, addr, method, path string, in, out any, timeout time.Duration) error {
	return Client{HC: hc}.Do(ctx, who, addr, method, path, in, out, timeout)
}

// Do sends method http://addr/path (https:// with HTTPS) with in (if not
// nil) as its JSON body and c's token (if any), within timeout, and
// decodes a 2xx answer into out: a *[]byte receives the raw body,
// anything else is JSON-decoded (nil: the body is discarded). Any other
// status is an error wrapping a *StatusError (see Code). Errors name the
// request and who, the process it was sent to.
func (c Client) Do(ctx context.Context, who, addr, method, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("httpjson: encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	scheme := "http://"
	if c.HTTPS {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+addr+path, body)
	if err != nil {
		return fmt.Errorf("httpjson: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HC.Do(req)
	if err != nil {
		return fmt.Errorf("httpjson: %s %s on %s: %w", method, path, who, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("httpjson: %s %s on %s: reading: %w", method, path, who, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("httpjson: %s %s on %s: %w", method, path, who, &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(b))})
	}
	if out != nil {
		if raw, ok := out.(*[]byte); ok {
			*raw = b
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("httpjson: %s %s on %s: decoding %q: %w", method, path, who, b, err)
		}
	}
	return nil
}
