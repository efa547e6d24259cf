package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every answer WriteRaw writes reaches the client with its
// Content-Length, not chunked: the small ones from net/http (WriteRaw
// leaves the header to it), the large ones from WriteRaw.
func TestSmallAnswersHaveContentLength(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		WriteRaw(w, http.StatusTooManyRequests, bytes.Repeat([]byte("x"), n))
	}))
	defer srv.Close()
	for _, n := range []int{0, 1, 100, smallBodyBytes - 1, smallBodyBytes, smallBodyBytes + 1, 64 << 10} {
		resp, err := http.Get(srv.URL + "/?n=" + strconv.Itoa(n))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Len(t, body, n)
		require.Equal(t, int64(n), resp.ContentLength, "a %d-byte answer", n)
		require.Empty(t, resp.TransferEncoding, "a %d-byte answer", n)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	}
}
