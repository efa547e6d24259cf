package wire

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestLeaseBatchRoundTrip(t *testing.T) {
	renew := EncodeLeaseRenew(LeaseRenew{LeaseReport: LeaseReport{Limit: "llm", LeaseID: 7, Epoch: 2, Spent: 3, RequestID: "r-1"}, DemandMilli: 5})
	open := EncodeLeaseOpen(LeaseOpen{Limit: "llm", Holder: "w", Group: "g", TTLNanos: 2e9, RequestID: "l-1"})
	ret := EncodeLeaseReturn(LeaseReport{Limit: "llm", LeaseID: 8, Epoch: 1, RequestID: "x-1"})
	calls := []LeaseCall{{Op: OpRenew, Payload: renew}, {Op: OpLease, Payload: open}, {Op: OpReturn, Payload: ret}}
	p, err := EncodeLeaseBatch(calls)
	if err != nil {
		t.Fatalf("EncodeLeaseBatch: %v", err)
	}
	got, err := DecodeLeaseBatch(p)
	if err != nil || len(got) != len(calls) {
		t.Fatalf("DecodeLeaseBatch = %d calls, %v; want %d", len(got), err, len(calls))
	}
	for i := range calls {
		if got[i].Op != calls[i].Op || !bytes.Equal(got[i].Payload, calls[i].Payload) {
			t.Errorf("call %d decoded as op %d %x; want op %d %x", i, got[i].Op, got[i].Payload, calls[i].Op, calls[i].Payload)
		}
	}
	answers := []LeaseAnswer{{Code: CodeOK, Payload: EncodeLeaseResult(LeaseResult{Status: LeaseGranted, Permits: 4})}, {Code: CodeInvalid, Payload: []byte("bad name")}, {Code: CodeOK, Payload: []byte{}}}
	back, err := DecodeLeaseBatchAnswers(EncodeLeaseBatchAnswers(answers), len(answers))
	if err != nil {
		t.Fatalf("DecodeLeaseBatchAnswers: %v", err)
	}
	for i := range answers {
		if back[i].Code != answers[i].Code || !bytes.Equal(back[i].Payload, answers[i].Payload) {
			t.Errorf("answer %d decoded as %+v; want %+v", i, back[i], answers[i])
		}
	}
	if _, err := DecodeLeaseBatchAnswers(EncodeLeaseBatchAnswers(answers), 2); !errors.Is(err, ErrLeaseBatch) {
		t.Errorf("answers decoded for the wrong count: err = %v; want ErrLeaseBatch", err)
	}
}

func TestLeaseBatchBounds(t *testing.T) {
	one := LeaseCall{Op: OpRenew, Payload: EncodeLeaseRenew(LeaseRenew{LeaseReport: LeaseReport{Limit: "a", LeaseID: 1, Epoch: 1}})}
	full := make([]LeaseCall, MaxLeaseBatch)
	for i := range full {
		full[i] = one
	}
	if _, err := EncodeLeaseBatch(full); err != nil {
		t.Fatalf("a batch of MaxLeaseBatch small commands: %v", err)
	}
	cases := []struct {
		name  string
		calls []LeaseCall
		want  string
	}{
		{"empty", nil, "1 to 512"},
		{"one too many", append(full, one), "1 to 512"},
		{"not a lease command", []LeaseCall{one, {Op: OpReserve, Payload: []byte{1}}}, "command 1 is operation 1; allowed: 15 (lease)"},
		{"too many bytes", []LeaseCall{{Op: OpLease, Payload: make([]byte, MaxClientFrame)}}, "at most 65527 bytes"},
		// count (1 byte), op (1), length (3): one byte over a client frame's payload.
		{"one byte too many", []LeaseCall{{Op: OpLease, Payload: make([]byte, MaxClientPayload-4)}}, "at most 65527 bytes"},
	}
	for _, c := range cases {
		p, err := EncodeLeaseBatch(c.calls)
		if !errors.Is(err, ErrLeaseBatch) || !strings.Contains(err.Error(), c.want) || p != nil {
			t.Errorf("%s: EncodeLeaseBatch = %d bytes, %v; want ErrLeaseBatch naming %q", c.name, len(p), err, c.want)
		}
	}
	// A batch of exactly one client frame's payload is encoded, and read
	// back through the node's client frame limit.
	exact, err := EncodeLeaseBatch([]LeaseCall{{Op: OpLease, Payload: make([]byte, MaxClientPayload-5)}})
	if err != nil || len(exact) != MaxClientPayload {
		t.Fatalf("a batch of %d bytes: %v; want it encoded", len(exact), err)
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	if err := WriteFrame(bw, Frame{ID: 1, Kind: OpLeaseBatch, Payload: exact}); err != nil || bw.Flush() != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrameLimit(&buf, MaxClientFrame); err != nil {
		t.Errorf("the largest batch does not fit a client frame: %v", err)
	}
	// The decoder holds the same bounds for payloads no encoder made.
	var w Enc
	w.Uvar(MaxLeaseBatch + 1)
	for range MaxLeaseBatch + 1 {
		w.U8(OpRenew)
		w.Bytes(one.Payload)
	}
	undecodable := map[string][]byte{
		"no count":       {},
		"zero commands":  {0},
		"too many":       w.B,
		"reserve inside": {1, OpReserve, 0},
		"truncated":      {2, OpRenew, 0},
		"trailing bytes": {1, OpRenew, 0, 9},
	}
	for name, p := range undecodable {
		if calls, err := DecodeLeaseBatch(p); !errors.Is(err, ErrLeaseBatch) || calls != nil {
			t.Errorf("%s: DecodeLeaseBatch = %d calls, %v; want ErrLeaseBatch", name, len(calls), err)
		}
	}
}
