package worker

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// gossipkeys.go: encrypted gossip. A worker given a keyring encrypts every
// memberlist packet and stream with the primary key (AES-GCM, memberlist's
// own) and accepts only those that decrypt with one of its keys, so a
// process without a key can neither join the group nor deliver a steal
// message; what memberlist drops is counted from its log lines (it has no
// counter of its own).

// MaxGossipKeyFileBytes bounds a gossip key file.
const MaxGossipKeyFileBytes = 64 << 10

// ParseGossipKeys reads a gossip key file: one key a line, base64 (standard
// or URL alphabet, padded or not) of 16, 24 or 32 bytes (AES-128, -192,
// -256); blank lines and lines starting with '#' are ignored. The first key
// is the primary (it encrypts); the others only decrypt, so that keys are
// rotated without downtime: add the new key second everywhere, then make
// it first everywhere, then remove the old one. Errors name the line and
// never repeat a key.
func ParseGossipKeys(r io.Reader) (*memberlist.Keyring, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxGossipKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: gossip key file: %v", ErrInvalidConfig, err)
	}
	if len(data) > MaxGossipKeyFileBytes {
		return nil, fmt.Errorf("%w: gossip key file larger than %d bytes", ErrInvalidConfig, MaxGossipKeyFileBytes)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var key []byte
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if k, err := enc.DecodeString(line); err == nil {
				key = k
				break
			}
		}
		switch {
		case key == nil:
			return nil, fmt.Errorf("%w: gossip key file line %d: not base64; allowed: one base64 key a line (16, 24 or 32 bytes, e.g. from `head -c 32 /dev/urandom | base64`)", ErrInvalidConfig, n)
		case len(key) != 16 && len(key) != 24 && len(key) != 32:
			return nil, fmt.Errorf("%w: gossip key file line %d: a key of %d bytes; allowed: 16, 24 or 32", ErrInvalidConfig, n, len(key))
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: gossip key file: %v", ErrInvalidConfig, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: gossip key file holds no key; allowed: one base64 key a line, the first the primary", ErrInvalidConfig)
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, fmt.Errorf("%w: gossip keys: %v", ErrInvalidConfig, err)
	}
	return kr, nil
}

// gossipRejectMarks are the parts of memberlist's log lines, in lower
// case, that report a packet or stream dropped because it was not
// encrypted with a key this worker holds (or was, when this worker does
// not encrypt): for a packet "Decrypt packet failed: <reason>", for a
// stream "failed to receive: <reason>", the reason being one of
// memberlist's errors (decryptPayload's, readStream's). memberlist has no
// counter or hook for them, and its wording is not stable (the stream
// line was matched as "No installed keys could decrypt" while v0.5.4
// writes it in lower case, so a wrong key's joins went uncounted): lines
// are matched whatever their case, and
// TestGossipRejectionsCountedOverLoopback sends each kind through the
// memberlist of go.mod, over its own UDP and TCP transport, so that an
// upgrade that rewords one fails there.
var gossipRejectMarks = [][]byte{
	[]byte("decrypt packet failed"),
	[]byte("no installed keys could decrypt"),
	[]byte("cannot decrypt empty payload"),
	[]byte("payload is too small to decrypt"),
	[]byte("unsupported encryption version"),
	[]byte("remote state is not encrypted"),
	[]byte("remote state is encrypted and encryption is not configured"),
}

// gossipLog passes memberlist's log lines on and counts the rejections.
type gossipLog struct {
	next     io.Writer
	rejected *atomic.Uint64
}

func (g gossipLog) Write(p []byte) (int, error) {
	if isGossipRejection(p) {
		g.rejected.Add(1)
	}
	return g.next.Write(p)
}

// isGossipRejection reports whether a memberlist log line reports a
// packet or stream dropped for its encryption (gossipRejectMarks).
func isGossipRejection(line []byte) bool {
	low := bytes.ToLower(line) // memberlist logs rarely: a copy per line costs nothing
	for _, m := range gossipRejectMarks {
		if bytes.Contains(low, m) {
			return true
		}
	}
	return false
}
