package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// adminCall sends an admin request the Go client has no method for
// (DELETE with ?force=true, POST /v1/cluster/transfer-leadership) to the
// servers in turn: a connection that could not be opened moves on to the
// next server at once; a 503 or a broken exchange does so only for an
// idempotent request (a transfer retried after an ambiguous failure could
// move leadership twice). At most three rounds, backing off between
// rounds, bounded by ctx. A non-2xx answer is returned as a
// *client.APIError; a 2xx answer is decoded into out (may be nil).
func adminCall(ctx context.Context, servers []string, method, path string, in any, idempotent bool, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
	}
	hc := &http.Client{}
	var last error
	const rounds = 3
	for a := 0; a < rounds*len(servers); a++ {
		if a > 0 && a%len(servers) == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s: %w (last failure: %v)", method, path, ctx.Err(), last)
			case <-time.After(time.Duration(a/len(servers)) * 100 * time.Millisecond):
			}
		}
		server := servers[a%len(servers)]
		base := server
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			var op *net.OpError
			if (errors.As(err, &op) && op.Op == "dial") || idempotent {
				continue
			}
			return fmt.Errorf("%s %s on %s: %w (the request may have been applied)", method, path, server, err)
		}
		msg, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			last = err
			if idempotent {
				continue
			}
			return fmt.Errorf("%s %s on %s: reading the answer: %w (the request may have been applied)", method, path, server, err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			var e struct {
				Error string `json:"error"`
			}
			text := strings.TrimSpace(string(msg))
			if json.Unmarshal(msg, &e) == nil && e.Error != "" {
				text = e.Error
			}
			apiErr := &client.APIError{Server: base, StatusCode: resp.StatusCode, Message: text}
			if resp.StatusCode == http.StatusServiceUnavailable && idempotent {
				last = apiErr
				continue
			}
			return apiErr
		}
		if out != nil {
			if err := json.Unmarshal(msg, out); err != nil {
				return fmt.Errorf("%s %s: cannot decode the answer of %s: %w", method, path, server, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: %s %s failed on every server; last failure: %w", client.ErrUnavailable, method, path, last)
}
