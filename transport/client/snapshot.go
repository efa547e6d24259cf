package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// SaveSnapshot writes the leader's consistent snapshot of the register to
// w (GET /v1/snapshot) and returns the applied index it covers. It asks
// the servers in turn until one answers: only the leader takes a
// snapshot, the others answer 503. The snapshot is streamed, not held in
// memory; on an error part of it may have been written to w.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (uint64, error) {
	var index uint64
	err := c.failover(ctx, "GET /v1/snapshot", func(server string) (attemptOutcome, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/v1/snapshot", nil)
		if err != nil {
			return attemptDone, fmt.Errorf("client: building request: %w", err)
		}
		c.authorize(req)
		res, err := c.hc.Do(req)
		if err != nil {
			if isDialError(err) {
				return attemptUndelivered, err
			}
			return attemptRetry, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
			apiErr := (&response{server: server, code: res.StatusCode, body: b}).apiError()
			if res.StatusCode == http.StatusServiceUnavailable {
				return attemptRetry, apiErr
			}
			return attemptDone, apiErr
		}
		index, err = strconv.ParseUint(res.Header.Get("X-Permitd-Applied-Index"), 10, 64)
		if err != nil {
			return attemptDone, fmt.Errorf("client: the snapshot of %s has no applied index: %w", server, err)
		}
		if _, err := io.Copy(w, res.Body); err != nil {
			return attemptDone, fmt.Errorf("client: reading the snapshot of %s: %w", server, err)
		}
		return attemptDone, nil
	})
	return index, err
}
