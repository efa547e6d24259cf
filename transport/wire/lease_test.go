package wire

import (
	"errors"
	"testing"
)

func TestLeaseCommandsRoundTrip(t *testing.T) {
	open := LeaseOpen{Limit: "llm", Holder: "w1", Group: "batch", Weight: 3, DemandMilli: 12_500, TTLNanos: 2e9, RequestID: "l-1"}
	if got, err := DecodeLeaseOpen(EncodeLeaseOpen(open)); err != nil || got != open {
		t.Fatalf("DecodeLeaseOpen = %+v, %v; want %+v", got, err, open)
	}
	rep := LeaseReport{Limit: "llm", LeaseID: 7, Epoch: 9, Spent: 4, StolenOut: 2, StolenIn: 1, RequestID: "r-1"}
	renew := LeaseRenew{LeaseReport: rep, Kept: 3, DemandMilli: 1, TTLNanos: 5e8}
	if got, err := DecodeLeaseRenew(EncodeLeaseRenew(renew)); err != nil || got != renew {
		t.Fatalf("DecodeLeaseRenew = %+v, %v; want %+v", got, err, renew)
	}
	if got, err := DecodeLeaseReturn(EncodeLeaseReturn(rep)); err != nil || got != rep {
		t.Fatalf("DecodeLeaseReturn = %+v, %v; want %+v", got, err, rep)
	}
	res := LeaseResult{Status: LeaseGranted, LeaseID: 7, Epoch: 10, Permits: 40, ExpiresInNanos: 2e9, ShareMilli: 20_000,
		CreditedPermits: 1, RetryAfterNanos: -1, Duplicate: true, Detail: "d"}
	if got, err := DecodeLeaseResult(EncodeLeaseResult(res)); err != nil || got != res {
		t.Fatalf("DecodeLeaseResult = %+v, %v; want %+v", got, err, res)
	}
}

// TestMalformedLeasePayloadsAreErrors: every proper prefix of a payload,
// and a payload with a trailing byte, is ErrMalformed, never a panic.
func TestMalformedLeasePayloadsAreErrors(t *testing.T) {
	rep := LeaseReport{Limit: "llm", LeaseID: 1 << 40, Epoch: 3, Spent: 5, RequestID: "x"}
	for name, c := range map[string]struct {
		p      []byte
		decode func([]byte) error
	}{
		"lease":  {EncodeLeaseOpen(LeaseOpen{Limit: "llm", Holder: "h", Group: "g", TTLNanos: 1e9}), func(p []byte) error { _, err := DecodeLeaseOpen(p); return err }},
		"renew":  {EncodeLeaseRenew(LeaseRenew{LeaseReport: rep, Kept: 1, TTLNanos: 1e9}), func(p []byte) error { _, err := DecodeLeaseRenew(p); return err }},
		"return": {EncodeLeaseReturn(rep), func(p []byte) error { _, err := DecodeLeaseReturn(p); return err }},
		"result": {EncodeLeaseResult(LeaseResult{Status: LeaseFenced, Detail: "gone"}), func(p []byte) error { _, err := DecodeLeaseResult(p); return err }},
	} {
		for n := range len(c.p) {
			if err := c.decode(c.p[:n]); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s truncated to %d of %d bytes: err = %v, want ErrMalformed", name, n, len(c.p), err)
			}
		}
		if err := c.decode(append(append([]byte(nil), c.p...), 0)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s with a trailing byte: err = %v, want ErrMalformed", name, err)
		}
	}
}
