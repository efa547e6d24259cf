package node

import (
	"fmt"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// codec.go: payloads of forwarded operations (see forward.go).

func encodeReserve(r fsm.Reserve) []byte {
	var w wbuf
	w.str(r.Limit)
	w.svar(r.Permits)
	w.svar(r.MaxWaitNanos)
	w.str(r.RequestID)
	return w.b
}

func decodeReserve(p []byte) (fsm.Reserve, error) {
	r := rbuf{b: p}
	v := fsm.Reserve{Limit: r.str(), Permits: r.svar(), MaxWaitNanos: r.svar(), RequestID: r.str()}
	return v, r.done()
}

func encodeReserveResult(res fsm.ReserveResult) []byte {
	var w wbuf
	w.u8(byte(res.Status))
	w.svar(res.WaitNanos)
	w.svar(res.RetryAfterNanos)
	w.svar(res.ExpiresInNanos)
	if res.Duplicate {
		w.u8(1)
	} else {
		w.u8(0)
	}
	w.str(res.Detail)
	return w.b
}

func decodeReserveResult(p []byte) (fsm.ReserveResult, error) {
	r := rbuf{b: p}
	v := fsm.ReserveResult{Status: fsm.Status(r.u8()), WaitNanos: r.svar(), RetryAfterNanos: r.svar(), ExpiresInNanos: r.svar(), Duplicate: r.u8() == 1, Detail: r.str()}
	return v, r.done()
}

func encodePut(name string, cfg bucket.Config) ([]byte, error) {
	cb, err := cfg.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	var w wbuf
	w.str(name)
	w.bytes(cb)
	return w.b, nil
}

func decodePut(p []byte) (string, bucket.Config, error) {
	r := rbuf{b: p}
	name := r.str()
	cb := r.bytes()
	if err := r.done(); err != nil {
		return "", bucket.Config{}, err
	}
	cfg, err := bucket.DecodeConfig(cb)
	if err != nil {
		return "", bucket.Config{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return name, cfg, nil
}

func encodeLimits(ls []fsm.LimitInfo) ([]byte, error) {
	var w wbuf
	w.uvar(uint64(len(ls)))
	for _, l := range ls {
		cb, err := l.Config.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		w.str(l.Name)
		w.bytes(cb)
		w.uvar(l.Version)
		w.uvar(l.GrantedRequests)
		w.uvar(l.GrantedPermits)
		w.uvar(l.RefusedRequests)
		putBool(&w, l.Leased)
	}
	return w.b, nil
}

func decodeLimits(p []byte) ([]fsm.LimitInfo, error) {
	r := rbuf{b: p}
	n := r.uvar()
	if n > uint64(len(p)) {
		return nil, errShortFrame
	}
	out := make([]fsm.LimitInfo, 0, min(n, 1024))
	for i := uint64(0); i < n && r.err == nil; i++ {
		name := r.str()
		cb := r.bytes()
		l := fsm.LimitInfo{Name: name, Version: r.uvar(), GrantedRequests: r.uvar(), GrantedPermits: r.uvar(), RefusedRequests: r.uvar(), Leased: getBool(&r)}
		if r.err != nil {
			break
		}
		cfg, err := bucket.DecodeConfig(cb)
		if err != nil {
			return nil, err
		}
		l.Config = cfg
		out = append(out, l)
	}
	return out, r.done()
}

func encodeStrings(ss ...string) []byte {
	var w wbuf
	for _, s := range ss {
		w.str(s)
	}
	return w.b
}

func decodeStrings(p []byte, n int) ([]string, error) {
	r := rbuf{b: p}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out, r.done()
}

// putBool and getBool carry a flag as one byte, 0 or 1; any other value
// makes the frame malformed.
func putBool(w *wbuf, v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func getBool(r *rbuf) bool {
	v := r.u8()
	if v > 1 {
		r.fail()
	}
	return v == 1
}

// Lease results and views (see lease.go). Every number is a varint, every
// name a length-prefixed string; decoding is bounded by the frame and never
// panics. Lease commands themselves travel in fsm's log encoding.

// decodeCommand decodes a forwarded lease command: the register's own log
// encoding (see leaseCommand), which fsm.Decode bounds and validates.
func decodeCommand(b []byte, want fsm.CommandType) (fsm.Entry, error) {
	e, err := fsm.Decode(b)
	if err != nil {
		return fsm.Entry{}, err
	}
	if e.Type != want {
		return fsm.Entry{}, fmt.Errorf("%w: forwarded command type %d where %d was expected", errShortFrame, e.Type, want)
	}
	return e, nil
}

func encodeLeaseResult(res fsm.LeaseResult) []byte {
	var w wbuf
	w.u8(byte(res.Status))
	w.uvar(res.LeaseID)
	w.uvar(res.Epoch)
	w.svar(res.Permits)
	w.svar(res.ExpiresInNanos)
	w.svar(res.ShareMilliPermitsPerSec)
	w.svar(res.CreditedPermits)
	w.svar(res.RetryAfterNanos)
	putBool(&w, res.Duplicate)
	w.str(res.Detail)
	return w.b
}

func decodeLeaseResult(b []byte) (fsm.LeaseResult, error) {
	r := rbuf{b: b}
	res := fsm.LeaseResult{Status: fsm.LeaseStatus(r.u8()), LeaseID: r.uvar(), Epoch: r.uvar(), Permits: r.svar(),
		ExpiresInNanos: r.svar(), ShareMilliPermitsPerSec: r.svar(), CreditedPermits: r.svar(), RetryAfterNanos: r.svar(),
		Duplicate: getBool(&r), Detail: r.str()}
	return res, r.done()
}

func encodeLeasePolicyResult(res fsm.LeasePolicyResult) []byte {
	var w wbuf
	putBool(&w, res.Applied)
	putBool(&w, res.UnknownLimit)
	w.svar(res.BurstPermits)
	w.svar(res.MaxOutstandingPermits)
	w.str(res.Detail)
	return w.b
}

func decodeLeasePolicyResult(b []byte) (fsm.LeasePolicyResult, error) {
	r := rbuf{b: b}
	res := fsm.LeasePolicyResult{Applied: getBool(&r), UnknownLimit: getBool(&r), BurstPermits: r.svar(),
		MaxOutstandingPermits: r.svar(), Detail: r.str()}
	return res, r.done()
}

// encodeLeaseView carries a pool and its leases (at most
// fsm.MaxLeasesPerLimit, about 100 bytes each: well inside one frame).
func encodeLeaseView(p fsm.LeasePoolInfo, ls []fsm.LeaseInfo) []byte {
	var w wbuf
	w.str(p.Limit)
	for _, v := range []int64{p.BurstPermits, p.MaxOutstandingPermits, p.BurstSpec, p.MaxOutstandingSpec, p.IntervalNanos,
		p.MintedPermits, p.FreePermits, p.OutstandingPermits, p.SettledPermits, p.SpentPermits, p.StolenPermits,
		p.ExpiredPermits, p.StolenInPermits, int64(p.ActiveLeases), int64(p.LingeringLeases)} {
		w.svar(v)
	}
	for _, v := range []uint64{p.LeasesOpened, p.Renewals, p.Returns, p.Expirations, p.Fenced} {
		w.uvar(v)
	}
	w.uvar(uint64(len(ls)))
	for _, l := range ls {
		w.uvar(l.ID)
		w.uvar(l.Epoch)
		putBool(&w, l.Active)
		w.str(l.Holder)
		w.str(l.Group)
		for _, v := range []int64{l.Weight, l.DemandMilliPermitsPerSec, l.ShareMilliPermitsPerSec, l.Permits,
			l.LingeringPermits, l.GrantedAtNanos, l.ExpiresAtNanos, l.StolenInPermits} {
			w.svar(v)
		}
	}
	return w.b
}

func decodeLeaseView(b []byte) (fsm.LeasePoolInfo, []fsm.LeaseInfo, error) {
	r := rbuf{b: b}
	p := fsm.LeasePoolInfo{Limit: r.str()}
	for _, v := range []*int64{&p.BurstPermits, &p.MaxOutstandingPermits, &p.BurstSpec, &p.MaxOutstandingSpec, &p.IntervalNanos,
		&p.MintedPermits, &p.FreePermits, &p.OutstandingPermits, &p.SettledPermits, &p.SpentPermits, &p.StolenPermits,
		&p.ExpiredPermits, &p.StolenInPermits} {
		*v = r.svar()
	}
	active, lingering := r.svar(), r.svar()
	if active < 0 || active > fsm.MaxLeasesPerLimit || lingering < 0 || lingering > fsm.MaxLeasesPerLimit {
		r.fail()
	}
	p.ActiveLeases, p.LingeringLeases = int(active), int(lingering)
	for _, v := range []*uint64{&p.LeasesOpened, &p.Renewals, &p.Returns, &p.Expirations, &p.Fenced} {
		*v = r.uvar()
	}
	n := r.uvar()
	// Each lease takes at least 20 bytes, so a count larger than the rest
	// of the frame (or than a limit can hold) is malformed.
	if n > fsm.MaxLeasesPerLimit || n > uint64(len(r.b)) {
		r.fail()
	}
	var ls []fsm.LeaseInfo
	if r.err == nil && n > 0 {
		ls = make([]fsm.LeaseInfo, 0, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := fsm.LeaseInfo{ID: r.uvar(), Epoch: r.uvar(), Active: getBool(&r), Holder: r.str(), Group: r.str()}
		for _, v := range []*int64{&l.Weight, &l.DemandMilliPermitsPerSec, &l.ShareMilliPermitsPerSec, &l.Permits,
			&l.LingeringPermits, &l.GrantedAtNanos, &l.ExpiresAtNanos, &l.StolenInPermits} {
			*v = r.svar()
		}
		ls = append(ls, l)
	}
	if err := r.done(); err != nil {
		return fsm.LeasePoolInfo{}, nil, err
	}
	return p, ls, nil
}
