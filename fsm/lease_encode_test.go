package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// leaseEntries returns one valid entry of every lease command, with
// extreme values.
func leaseEntries(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	add := func(b []byte, err error) {
		if err != nil {
			t.Fatalf("leaseEntries: %v", err)
		}
		out = append(out, b)
	}
	add(AppendLeasePolicy(nil, at(1), LeasePolicy{Limit: "hot", Leased: true, BurstPermits: MaxLeasePoolPermits, MaxOutstandingPermits: 1}))
	add(AppendLeasePolicy(nil, at(2), LeasePolicy{Limit: "hot"}))
	add(AppendLease(nil, at(3), Lease{Limit: "hot", Holder: "w-1:9000", Group: "g.a", Weight: MaxLeaseWeight,
		DemandMilliPermitsPerSec: MaxDemandMilliPermitsPerSec, TTLNanos: MaxLeaseTTLNanos, RequestID: strings.Repeat("r", MaxRequestIDLen)}))
	add(AppendLease(nil, at(4), Lease{Limit: "hot", Holder: "w", Group: "g", Weight: 1, TTLNanos: MinLeaseTTLNanos}))
	add(AppendRenew(nil, at(5), Renew{Report: Report{Limit: "hot", LeaseID: math.MaxUint64, Epoch: math.MaxUint64, SpentPermits: math.MaxInt64, StolenOutPermits: math.MaxInt64, StolenInPermits: math.MaxInt64}, DemandMilliPermitsPerSec: 7, TTLNanos: sec, RequestID: "id"}))
	add(AppendReturn(nil, at(math.MinInt64), Return{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 1}}))
	add(AppendReturn(nil, at(math.MaxInt64), Return{Report: Report{Limit: "hot", LeaseID: 2, Epoch: 3, SpentPermits: 4, StolenOutPermits: 5, StolenInPermits: 6}, RequestID: "x"}))
	return out
}

func TestLeaseEncodeDecodeRoundTrip(t *testing.T) {
	want := []Entry{
		{Type: CmdPutLeasePolicy, Stamp: at(1), Policy: LeasePolicy{Limit: "hot", Leased: true, BurstPermits: MaxLeasePoolPermits, MaxOutstandingPermits: 1}},
		{Type: CmdPutLeasePolicy, Stamp: at(2), Policy: LeasePolicy{Limit: "hot"}},
		{Type: CmdLease, Stamp: at(3), Lease: Lease{Limit: "hot", Holder: "w-1:9000", Group: "g.a", Weight: MaxLeaseWeight,
			DemandMilliPermitsPerSec: MaxDemandMilliPermitsPerSec, TTLNanos: MaxLeaseTTLNanos, RequestID: strings.Repeat("r", MaxRequestIDLen)}},
		{Type: CmdLease, Stamp: at(4), Lease: Lease{Limit: "hot", Holder: "w", Group: "g", Weight: 1, TTLNanos: MinLeaseTTLNanos}},
		{Type: CmdRenew, Stamp: at(5), Renew: Renew{Report: Report{Limit: "hot", LeaseID: math.MaxUint64, Epoch: math.MaxUint64, SpentPermits: math.MaxInt64, StolenOutPermits: math.MaxInt64, StolenInPermits: math.MaxInt64}, DemandMilliPermitsPerSec: 7, TTLNanos: sec, RequestID: "id"}},
		{Type: CmdReturn, Stamp: at(math.MinInt64), Return: Return{Report: Report{Limit: "hot", LeaseID: 1, Epoch: 1}}},
		{Type: CmdReturn, Stamp: at(math.MaxInt64), Return: Return{Report: Report{Limit: "hot", LeaseID: 2, Epoch: 3, SpentPermits: 4, StolenOutPermits: 5, StolenInPermits: 6}, RequestID: "x"}},
	}
	for i, b := range leaseEntries(t) {
		e, err := Decode(b)
		if err != nil {
			t.Fatalf("entry %d: Decode: %v", i, err)
		}
		if !reflect.DeepEqual(e, want[i]) {
			t.Errorf("entry %d: Decode = %+v, want %+v", i, e, want[i])
		}
		if got := reencode(t, e); !bytes.Equal(got, b) {
			t.Errorf("entry %d: re-encodes to %x, want %x", i, got, b)
		}
	}
}

func TestLeaseAppendRejects(t *testing.T) {
	ok := Lease{Limit: "hot", Holder: "w", Group: "g", Weight: 1, TTLNanos: sec}
	with := func(f func(*Lease)) Lease { q := ok; f(&q); return q }
	tests := []struct {
		desc string
		fn   func(b []byte) ([]byte, error)
		want string
	}{
		{"policy bad name", func(b []byte) ([]byte, error) {
			return AppendLeasePolicy(b, at(0), LeasePolicy{Limit: "a b", Leased: true})
		}, "limit name"},
		{"policy negative burst", func(b []byte) ([]byte, error) {
			return AppendLeasePolicy(b, at(0), LeasePolicy{Limit: "a", Leased: true, BurstPermits: -1})
		}, "burst -1"},
		{"policy huge outstanding", func(b []byte) ([]byte, error) {
			return AppendLeasePolicy(b, at(0), LeasePolicy{Limit: "a", Leased: true, MaxOutstandingPermits: MaxLeasePoolPermits + 1})
		}, "max outstanding"},
		{"policy capacities with leasing off", func(b []byte) ([]byte, error) {
			return AppendLeasePolicy(b, at(0), LeasePolicy{Limit: "a", BurstPermits: 5})
		}, "both 0 when Leased is false"},
		{"lease empty holder", func(b []byte) ([]byte, error) { return AppendLease(b, at(0), with(func(q *Lease) { q.Holder = "" })) }, "holder name"},
		{"lease bad group", func(b []byte) ([]byte, error) { return AppendLease(b, at(0), with(func(q *Lease) { q.Group = "g/1" })) }, "group name"},
		{"lease weight 0", func(b []byte) ([]byte, error) { return AppendLease(b, at(0), with(func(q *Lease) { q.Weight = 0 })) }, "weight 0"},
		{"lease heavy", func(b []byte) ([]byte, error) {
			return AppendLease(b, at(0), with(func(q *Lease) { q.Weight = MaxLeaseWeight + 1 }))
		}, "weight 1000001"},
		{"lease negative demand", func(b []byte) ([]byte, error) {
			return AppendLease(b, at(0), with(func(q *Lease) { q.DemandMilliPermitsPerSec = -1 }))
		}, "demand -1"},
		{"lease short TTL", func(b []byte) ([]byte, error) {
			return AppendLease(b, at(0), with(func(q *Lease) { q.TTLNanos = MinLeaseTTLNanos - 1 }))
		}, "TTL 99999999ns"},
		{"lease long TTL", func(b []byte) ([]byte, error) {
			return AppendLease(b, at(0), with(func(q *Lease) { q.TTLNanos = MaxLeaseTTLNanos + 1 }))
		}, "TTL 60000000001ns"},
		{"lease long id", func(b []byte) ([]byte, error) {
			return AppendLease(b, at(0), with(func(q *Lease) { q.RequestID = strings.Repeat("i", MaxRequestIDLen+1) }))
		}, "request id"},
		{"renew lease 0", func(b []byte) ([]byte, error) {
			return AppendRenew(b, at(0), Renew{Report: Report{Limit: "a", Epoch: 1}, TTLNanos: sec})
		}, "lease 0 epoch 1"},
		{"renew epoch 0", func(b []byte) ([]byte, error) {
			return AppendRenew(b, at(0), Renew{Report: Report{Limit: "a", LeaseID: 1}, TTLNanos: sec})
		}, "lease 1 epoch 0"},
		{"renew negative spent", func(b []byte) ([]byte, error) {
			return AppendRenew(b, at(0), Renew{Report: Report{Limit: "a", LeaseID: 1, Epoch: 1, SpentPermits: -1}, TTLNanos: sec})
		}, "spent -1"},
		{"renew no TTL", func(b []byte) ([]byte, error) {
			return AppendRenew(b, at(0), Renew{Report: Report{Limit: "a", LeaseID: 1, Epoch: 1}})
		}, "TTL 0ns"},
		{"return negative stolen out", func(b []byte) ([]byte, error) {
			return AppendReturn(b, at(0), Return{Report: Report{Limit: "a", LeaseID: 1, Epoch: 1, StolenOutPermits: -2}})
		}, "stolen out -2"},
	}
	for _, tt := range tests {
		b, err := tt.fn([]byte("keep"))
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want ErrInvalidCommand containing %q", tt.desc, err, tt.want)
		}
		if string(b) != "keep" {
			t.Errorf("%s: b = %q, want it unchanged", tt.desc, b)
		}
	}
}

func TestLeaseDecodeRejects(t *testing.T) {
	hdr := func(typ CommandType) []byte { return appendHeader(nil, typ, at(5)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	str := func(s string) []byte { return appendBytes(nil, s) }
	lease := func(weight, demand, ttl uint64) []byte {
		return cat(hdr(CmdLease), str("hot"), str("w"), str("g"), uv(weight), uv(demand), uv(ttl), str(""))
	}
	tests := []decodeReject{
		{"policy leased byte 2", cat(hdr(CmdPutLeasePolicy), str("a"), []byte{2}, uv(0), uv(0)), false, "leased byte 2"},
		{"policy burst beyond int64", cat(hdr(CmdPutLeasePolicy), str("a"), []byte{1}, uv(math.MaxUint64), uv(0)), true, "int64 range"},
		{"policy burst too large", cat(hdr(CmdPutLeasePolicy), str("a"), []byte{1}, uv(1<<61), uv(0)), true, "burst"},
		{"policy trailing", cat(hdr(CmdPutLeasePolicy), str("a"), []byte{1}, uv(0), uv(0), []byte{0}), false, "trailing"},
		{"lease ok but truncated", lease(1, 0, uint64(sec))[:20], false, "truncated"},
		{"lease weight 0", lease(0, 0, uint64(sec)), true, "weight 0"},
		{"lease TTL 0", lease(1, 0, 0), true, "TTL 0ns"},
		{"lease demand too high", lease(1, uint64(MaxDemandMilliPermitsPerSec)+1, uint64(sec)), true, "demand"},
		{"lease empty holder", cat(hdr(CmdLease), str("hot"), str(""), str("g"), uv(1), uv(0), uv(uint64(sec)), str("")), true, "holder name"},
		{"lease long holder", cat(hdr(CmdLease), str("hot"), str(strings.Repeat("h", 129)), str("g"), uv(1), uv(0), uv(uint64(sec)), str("")), false, "holder: length 129"},
		{"renew epoch 0", cat(hdr(CmdRenew), str("hot"), uv(1), uv(0), uv(0), uv(0), uv(0), uv(0), uv(0), uv(uint64(sec)), str("")), true, "epoch 0"},
		{"renew spent beyond int64", cat(hdr(CmdRenew), str("hot"), uv(1), uv(1), uv(1<<63), uv(0), uv(0), uv(0), uv(0), uv(uint64(sec)), str("")), true, "int64 range"},
		{"return non-canonical varint", cat(hdr(CmdReturn), str("hot"), []byte{0x81, 0x00}, uv(1), uv(0), uv(0), uv(0), str("")), false, "shortest form"},
		{"unknown type 17", []byte{17, 4, 0, 0, 0, 0, 0, 0, 0, 0}, false, "unknown command type 17 (known: 1-16)"},
	}
	checkDecodeRejects(t, tests)
}
