package node

import (
	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// viewcodec.go: what the leader answers the reads a follower forwards
// (wire.OpRead, wire.OpLeaseView): a list of limits and a lease pool with
// its leases; and the string payloads of the operations that are not
// commands (a read's limit, a join's id and address). Every number is a
// varint, every name a length-prefixed string; decoding is bounded by the
// frame and never panics.

// encodeLimits carries limits as fsm.LimitInfo has them (the configuration
// in bucket's binary encoding).
func encodeLimits(ls []fsm.LimitInfo) ([]byte, error) {
	var w wire.Enc
	w.Uvar(uint64(len(ls)))
	for _, l := range ls {
		cb, err := l.Config.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		w.Str(l.Name)
		w.Bytes(cb)
		w.Uvar(l.Version)
		w.Uvar(l.GrantedRequests)
		w.Uvar(l.GrantedPermits)
		w.Uvar(l.RefusedRequests)
		w.Bool(l.Leased)
		if l.Leased {
			for _, v := range [...]int64{l.Lease.BurstPermits, l.Lease.MaxOutstandingPermits, l.Lease.BurstSpec, l.Lease.MaxOutstandingSpec, int64(l.Lease.Leases)} {
				w.Svar(v)
			}
		}
		w.Bool(l.Shadow)
		w.Uvar(l.ShadowWouldRefuse)
		w.Uvar(l.ShadowWouldWait)
		for _, v := range [...]uint64{l.ShadowGranted, l.ExpiredRequests, l.ExpiredPermits, l.RefundedPermits, l.ChargedPermits, l.NetPermits} {
			w.Uvar(v)
		}
		w.Svar(l.InFlightPermits)
		w.Svar(int64(l.OpenReservations))
	}
	return w.B, nil
}

// decodeLimits decodes what encodeLimits encoded.
func decodeLimits(p []byte) ([]fsm.LimitInfo, error) {
	r := wire.Dec{B: p}
	n := r.Uvar()
	if n > uint64(len(p)) {
		return nil, wire.ErrMalformed
	}
	out := make([]fsm.LimitInfo, 0, min(n, 1024))
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		name := r.Str()
		cb := r.Bytes()
		l := fsm.LimitInfo{Name: name, Version: r.Uvar(), GrantedRequests: r.Uvar(), GrantedPermits: r.Uvar(), RefusedRequests: r.Uvar(), Leased: r.Bool()}
		if l.Leased {
			l.Lease = fsm.LeaseSummary{BurstPermits: r.Svar(), MaxOutstandingPermits: r.Svar(), BurstSpec: r.Svar(), MaxOutstandingSpec: r.Svar(), Leases: int(r.Svar())}
		}
		l.Shadow = r.Bool()
		l.ShadowWouldRefuse, l.ShadowWouldWait = r.Uvar(), r.Uvar()
		l.ShadowGranted, l.ExpiredRequests, l.ExpiredPermits = r.Uvar(), r.Uvar(), r.Uvar()
		l.RefundedPermits, l.ChargedPermits, l.NetPermits = r.Uvar(), r.Uvar(), r.Uvar()
		l.InFlightPermits, l.OpenReservations = r.Svar(), int(r.Svar())
		if r.Err() != nil {
			break
		}
		cfg, err := bucket.DecodeConfig(cb)
		if err != nil {
			return nil, err
		}
		l.Config = cfg
		out = append(out, l)
	}
	return out, r.Done()
}

// encodeStrings is a payload of strings.
func encodeStrings(ss ...string) []byte {
	var w wire.Enc
	for _, s := range ss {
		w.Str(s)
	}
	return w.B
}

// decodeStrings decodes n strings encodeStrings encoded.
func decodeStrings(p []byte, n int) ([]string, error) {
	r := wire.Dec{B: p}
	out := make([]string, n)
	for i := range out {
		out[i] = r.Str()
	}
	return out, r.Done()
}

// encodeLeaseResult encodes a lease command's result as package wire
// does for binary clients: one codec for it.

// encodeLeaseView carries a pool and its leases (at most
// fsm.MaxLeasesPerLimit, about 100 bytes each: well inside one frame).
func encodeLeaseView(p fsm.LeasePoolInfo, ls []fsm.LeaseInfo) []byte {
	var w wire.Enc
	w.Str(p.Limit)
	for _, v := range []int64{p.BurstPermits, p.MaxOutstandingPermits, p.BurstSpec, p.MaxOutstandingSpec, p.IntervalNanos,
		p.MintedPermits, p.FreePermits, p.OutstandingPermits, p.SettledPermits, p.SpentPermits, p.StolenPermits,
		p.ExpiredPermits, p.StolenInPermits, int64(p.ActiveLeases), int64(p.LingeringLeases)} {
		w.Svar(v)
	}
	for _, v := range []uint64{p.LeasesOpened, p.Renewals, p.Returns, p.Expirations, p.Fenced} {
		w.Uvar(v)
	}
	w.Uvar(uint64(len(ls)))
	for _, l := range ls {
		w.Uvar(l.ID)
		w.Uvar(l.Epoch)
		w.Bool(l.Active)
		w.Str(l.Holder)
		w.Str(l.Group)
		for _, v := range []int64{l.Weight, l.DemandMilliPermitsPerSec, l.ShareMilliPermitsPerSec, l.Permits,
			l.LingeringPermits, l.GrantedAtNanos, l.ExpiresAtNanos, l.StolenInPermits} {
			w.Svar(v)
		}
	}
	return w.B
}

// decodeLeaseView decodes what encodeLeaseView encoded.
func decodeLeaseView(b []byte) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error) {
	r := wire.Dec{B: b}
	p := fsm.LeasePoolInfo{Limit: r.Str()}
	for _, v := range []*int64{&p.BurstPermits, &p.MaxOutstandingPermits, &p.BurstSpec, &p.MaxOutstandingSpec, &p.IntervalNanos,
		&p.MintedPermits, &p.FreePermits, &p.OutstandingPermits, &p.SettledPermits, &p.SpentPermits, &p.StolenPermits,
		&p.ExpiredPermits, &p.StolenInPermits} {
		*v = r.Svar()
	}
	active, lingering := r.Svar(), r.Svar()
	if active < 0 || active > fsm.MaxLeasesPerLimit || lingering < 0 || lingering > fsm.MaxLeasesPerLimit {
		r.Fail()
	}
	p.ActiveLeases, p.LingeringLeases = int(active), int(lingering)
	for _, v := range []*uint64{&p.LeasesOpened, &p.Renewals, &p.Returns, &p.Expirations, &p.Fenced} {
		*v = r.Uvar()
	}
	n := r.Uvar()
	// Each lease takes at least 20 bytes, so a count larger than the rest
	// of the frame (or than a limit can hold) is malformed.
	if n > fsm.MaxLeasesPerLimit || n > uint64(len(r.B)) {
		r.Fail()
	}
	var ls []fsm.LeaseInfo
	if r.Err() == nil && n > 0 {
		ls = make([]fsm.LeaseInfo, 0, n)
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		l := fsm.LeaseInfo{ID: r.Uvar(), Epoch: r.Uvar(), Active: r.Bool(), Holder: r.Str(), Group: r.Str()}
		for _, v := range []*int64{&l.Weight, &l.DemandMilliPermitsPerSec, &l.ShareMilliPermitsPerSec, &l.Permits,
			&l.LingeringPermits, &l.GrantedAtNanos, &l.ExpiresAtNanos, &l.StolenInPermits} {
			*v = r.Svar()
		}
		ls = append(ls, l)
	}
	if err := r.Done(); err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	return p, ls, nil
}
