package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// leaseBatchCommands is a batch with every kind of lease command, extreme
// values and arrivals out of order (the third before the second: it is
// encoded as arriving with the second).
func leaseBatchCommands() []LeaseCommand {
	return []LeaseCommand{
		{Kind: CmdLease, Lease: Lease{Limit: "hot", Holder: "w", Group: "g", Weight: MaxLeaseWeight, DemandMilliPermitsPerSec: MaxDemandMilliPermitsPerSec, TTLNanos: MaxLeaseTTLNanos, RequestID: "l"}, ArrivedNanos: 10},
		{Kind: CmdRenew, Renew: Renew{Report: Report{Limit: "hot", LeaseID: math.MaxUint64, Epoch: 7, SpentPermits: 3, StolenOutPermits: 1, StolenInPermits: 2}, KeptPermits: 4, DemandMilliPermitsPerSec: 5, TTLNanos: sec, RequestID: "r"}, ArrivedNanos: 30},
		{Kind: CmdReturn, Return: Return{Report: Report{Limit: "cold", LeaseID: 1, Epoch: 1}}, ArrivedNanos: 20},
	}
}

// leaseBatchEntry is leaseBatchCommands encoded at time 5.
func leaseBatchEntry(t testing.TB) []byte {
	t.Helper()
	b, err := AppendLeaseBatch(nil, at(5), leaseBatchCommands())
	if err != nil {
		t.Fatalf("AppendLeaseBatch: %v", err)
	}
	return b
}

func TestLeaseBatchEncodeDecodeRoundTrip(t *testing.T) {
	b := leaseBatchEntry(t)
	e, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := leaseBatchCommands()
	want[2].ArrivedNanos = 30 // arrivals are non-decreasing
	if e.Type != CmdLeaseBatch || e.Stamp != at(5) || !reflect.DeepEqual(e.LeaseBatch, want) {
		t.Fatalf("Decode = %+v, want the batch %+v", e, want)
	}
	if got := reencode(t, e); !bytes.Equal(got, b) {
		t.Fatalf("re-encodes to %x, want %x", got, b)
	}
}

func TestLeaseBatchRejects(t *testing.T) {
	cs := leaseBatchCommands()
	badKind := append([]LeaseCommand(nil), cs...)
	badKind[1].Kind = CmdReserveBatch
	badRenew := append([]LeaseCommand(nil), cs...)
	badRenew[1].Renew.TTLNanos = 0
	for _, tt := range []struct {
		desc string
		cs   []LeaseCommand
		want string
	}{
		{"empty", nil, "batch of 0 lease commands (allowed: 1-4096)"},
		{"too many", make([]LeaseCommand, MaxBatchLeaseCommands+1), "batch of 4097 lease commands (allowed: 1-4096)"},
		{"bad kind", badKind, "lease command kind 3 (allowed: 5 lease, 6 renew, 7 return) (lease command 1 of 3 in the batch)"},
		{"bad renew", badRenew, "(lease command 1 of 3 in the batch)"},
	} {
		b, err := AppendLeaseBatch([]byte("x"), at(0), tt.cs)
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) || string(b) != "x" {
			t.Errorf("%s: AppendLeaseBatch = %q, %v; want b unchanged and ErrInvalidCommand containing %q", tt.desc, b, err, tt.want)
		}
	}

	good := leaseBatchEntry(t)
	head := good[:headerLen]
	withKind := func(k byte) []byte {
		b := append(append([]byte(nil), head...), 1, k, 0)
		return appendReturnPayload(b, Return{Report: Report{Limit: "a", LeaseID: 1, Epoch: 1}})
	}
	for _, tt := range []struct {
		desc string
		b    []byte
		want string
	}{
		{"count 0", append(append([]byte(nil), head...), 0), "batch of 0 lease commands"},
		{"count too large", append(append([]byte(nil), head...), 0x81, 0x20), "batch of 4097 lease commands"},
		{"kind 4", withKind(4), "lease command kind 4"},
		{"kind 7", withKind(7), ""},
		{"truncated", good[:len(good)-1], "truncated"},
		{"trailing byte", append(append([]byte(nil), good...), 0), "trailing"},
		{"arrival overflow", append(append([]byte(nil), head[:2]...), append(bytes.Repeat([]byte{0x7f}, 8), append(make([]byte, 8), 1, byte(CmdReturn), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)...)...), "exceeds the int64 range"},
	} {
		_, err := Decode(tt.b)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Decode = %v, want it to decode", tt.desc, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Decode error %v, want one containing %q", tt.desc, err, tt.want)
		}
	}
}

// TestLeaseBatchEqualsSequential: rounds of lease commands from a fleet of
// holders (opens, renewals spending and keeping random parts of their
// grants, returns, stale epochs, retried request IDs, arrivals spread and
// equal) give the same results and the same state applied as one
// CmdLeaseBatch per round as applied one entry each, stamped at their
// arrivals. Some rounds go into an entry stamped in an older term: then
// no time passes for any command of it, batched or not.
func TestLeaseBatchEqualsSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	one, seq := leased(t, 60, 120), leased(t, 60, 120)
	grants := map[string]LeaseResult{}
	now := sec
	var granted, fenced, dups, returned int
	for round := range 300 {
		var cs []LeaseCommand
		first := now
		var lastID string
		for range 1 + rng.IntN(6) {
			if rng.IntN(2) == 0 {
				now += rng.Int64N(40 * ms)
			}
			holder := fmt.Sprintf("h%d", rng.IntN(8))
			id := fmt.Sprintf("q%d-%d", round, rng.IntN(1000))
			if lastID != "" && rng.IntN(8) == 0 {
				id = lastID // a retry within the batch
			}
			lastID = id
			g, ok := grants[holder]
			var c LeaseCommand
			switch {
			case !ok:
				c = LeaseCommand{Kind: CmdLease, Lease: Lease{Limit: "hot", Holder: holder, Group: fmt.Sprintf("g%d", rng.IntN(3)), Weight: 1,
					DemandMilliPermitsPerSec: perSec(50 + rng.Int64N(400)), TTLNanos: 300 * ms, RequestID: id}}
			case rng.IntN(10) == 0:
				c = LeaseCommand{Kind: CmdReturn, Return: Return{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: rng.Int64N(g.Permits + 1)}, RequestID: id}}
			default:
				spent := rng.Int64N(g.Permits + 1)
				q := Renew{Report: Report{Limit: "hot", LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: spent}, KeptPermits: rng.Int64N(g.Permits - spent + 1),
					DemandMilliPermitsPerSec: perSec(50 + rng.Int64N(400)), TTLNanos: 300 * ms, RequestID: id}
				if rng.IntN(10) == 0 {
					q.Epoch++ // stale
				}
				c = LeaseCommand{Kind: CmdRenew, Renew: q}
			}
			c.ArrivedNanos = now
			cs = append(cs, c)
		}
		term := uint64(1)
		if rng.IntN(10) == 0 {
			term = 0 // stamped in another term than the entries' (1)
		}
		var got []LeaseResult
		for _, c := range cs {
			var b []byte
			var err error
			st := Stamp{Nanos: c.ArrivedNanos, Term: term}
			switch c.Kind {
			case CmdLease:
				b, err = AppendLease(nil, st, c.Lease)
			case CmdRenew:
				b, err = AppendRenew(nil, st, c.Renew)
			default:
				b, err = AppendReturn(nil, st, c.Return)
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			got = append(got, seq.leaseResult(b))
		}
		b, err := AppendLeaseBatch(nil, Stamp{Nanos: first, Term: term}, cs)
		if err != nil {
			t.Fatalf("round %d: AppendLeaseBatch: %v", round, err)
		}
		one.index = seq.index - 1 // the batch gets the index of the last single entry
		want, ok := one.apply(b).([]LeaseResult)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: one at a time %+v, in a batch %+v", round, got, want)
		}
		if one.f.StateHash() != seq.f.StateHash() {
			t.Fatalf("round %d: the state after a batch differs from the state after the same commands one at a time", round)
		}
		for i, r := range got {
			holder := cs[i].Lease.Holder
			if cs[i].Kind != CmdLease {
				for h, g := range grants {
					if g.LeaseID == cs[i].Renew.LeaseID+cs[i].Return.LeaseID {
						holder = h
					}
				}
			}
			switch {
			case r.Duplicate:
				dups++
			case r.Status == LeaseGranted:
				granted++
				grants[holder] = r
			case r.Status == LeaseFenced || r.Status == LeaseReturned:
				if r.Status == LeaseFenced {
					fenced++
				} else {
					returned++
				}
				delete(grants, holder)
			}
		}
		now += 50 * ms
	}
	if granted == 0 || fenced == 0 || dups == 0 || returned == 0 {
		t.Fatalf("weak test: %d granted, %d fenced, %d duplicates, %d returned", granted, fenced, dups, returned)
	}
	t.Logf("%d granted, %d fenced, %d duplicates, %d returned", granted, fenced, dups, returned)
}
