package node

import (
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// resultcodec.go: what the leader answers a forwarded operation (see
// command.go): the register's result of a command, in one tagged codec
// (encodeResult, decodeResult), and the views (limits, a lease pool). The
// results a binary client also reads (a reserve's, a session's, a lease
// command's) travel in package wire's encoding of them, the one codec.
// Every number is a varint, every name a length-prefixed string; decoding
// is bounded by the frame and never panics.

// Result tags: the first byte of an encoded result.
const (
	resultReserve byte = 1 + iota
	resultSession
	resultPut
	resultDelete
	resultLease
	resultLeasePolicy
	// resultReserveTracked is a reserve result with its reservation ID and
	// blocking limit (the reservation form).
	resultReserveTracked
	resultSettle
	resultRelease
	// resultReserveDecided is a tracked reserve result preceded by the
	// raft index of the entry that decided it (decidedReserve). A leader
	// now sends resultReserveHeld instead; it is still decoded.
	resultReserveDecided
	resultExpiredGrants
	// resultReserveHeld is a tracked reserve result preceded by the raft
	// index of the entry that decided it (0: a replay) and by how long the
	// leader held the forwarded call before the result's durations count
	// (decidedReserve.held). A leader now sends resultReserveHoldEnd
	// instead; it is still decoded (its hold's end then is its expiry:
	// never later than the hold's).
	resultReserveHeld
	// resultReserveHoldEnd is resultReserveHeld with, after the held
	// time, the result's HoldExpiresInNanos.
	resultReserveHoldEnd
)

// decidedReserve is a reserve's result with the raft index of the entry
// that decided it: the leader sends it for a grant with an expiry, which
// the forwarding follower may find expired and then reports
// (expiredgrants.go; index 0 for a replay, which is not reported).
//
// at is the moment, on the node that made res, from which res's
// durations count (taken before its held time was subtracted: the
// register's hold outlasts at + ExpiresInNanos). held is, in an answer
// to a forwarded reserve, at minus the moment the leader read the call:
// the follower counts the expiry from its sending of the call plus held,
// never from when the answer came back (answer.go).
type decidedReserve struct {
	res   fsm.ReserveResult
	index uint64
	at    time.Time
	held  time.Duration
}

// decodeReserveAnswer decodes the leader's answer to a forwarded reserve:
// a result, with or without the index that decided it.
func decodeReserveAnswer(b []byte) (decidedReserve, error) {
	v, err := decodeResult(b)
	if err != nil {
		return decidedReserve{}, err
	}
	switch d := v.(type) {
	case decidedReserve:
		return d, nil
	case fsm.ReserveResult:
		return decidedReserve{res: d}, nil
	}
	return decidedReserve{}, fmt.Errorf("%w: internal error: reserve answered %T (outcome unknown)", ErrNoLeader, v)
}

// encodeResult encodes one of the register's results.
func encodeResult(v any) ([]byte, error) {
	switch res := v.(type) {
	case decidedReserve:
		w := wire.Enc{B: []byte{resultReserveHoldEnd}}
		w.Uvar(res.index)
		w.Uvar(uint64(max(res.held, 0)))
		w.Svar(res.res.HoldExpiresInNanos)
		return appendTracked(w, res.res), nil
	case fsm.ReserveResult:
		if res.ReservationID != 0 || res.Blocking != "" {
			return appendTracked(wire.Enc{B: []byte{resultReserveTracked}}, res), nil
		}
		return append([]byte{resultReserve}, wire.EncodeReserveResult(ToWireReserveResult(res))...), nil
	case fsm.SettleResult:
		w := wire.Enc{B: []byte{resultSettle}}
		w.Uvar(uint64(res.Status))
		w.Bool(res.Duplicate)
		w.Str(res.Detail)
		w.Uvar(uint64(len(res.Parts)))
		for _, p := range res.Parts {
			w.Str(p.Limit)
			for _, v := range [...]int64{p.Reserved, p.Actual, p.Refunded, p.Charged} {
				w.Uvar(uint64(v))
			}
		}
		return w.B, nil
	case fsm.ReleaseResult:
		w := wire.Enc{B: []byte{resultRelease}}
		w.Uvar(uint64(res.Status))
		w.Bool(res.Duplicate)
		w.Str(res.Detail)
		w.Uvar(uint64(res.Released))
		return w.B, nil
	case fsm.ExpiredGrantsResult:
		w := wire.Enc{B: []byte{resultExpiredGrants}}
		w.Uvar(uint64(res.Counted))
		return w.B, nil
	case fsm.SessionResult:
		return append([]byte{resultSession}, wire.EncodeSessionResult(ToWireSessionResult(res))...), nil
	case fsm.PutResult:
		w := wire.Enc{B: []byte{resultPut}}
		w.Uvar(res.Version)
		w.Bool(res.Created)
		w.Str(res.Detail)
		return w.B, nil
	case fsm.DeleteResult:
		w := wire.Enc{B: []byte{resultDelete}}
		w.Bool(res.Existed)
		w.Str(res.Detail)
		return w.B, nil
	case fsm.LeaseResult:
		return append([]byte{resultLease}, encodeLeaseResult(res)...), nil
	case fsm.LeasePolicyResult:
		return append([]byte{resultLeasePolicy}, encodeLeasePolicyResult(res)...), nil
	}
	return nil, fmt.Errorf("node: internal error: no codec for the result %T", v)
}

// appendTracked appends res with its reservation fields to w.
func appendTracked(w wire.Enc, res fsm.ReserveResult) []byte {
	w.Uvar(res.ReservationID)
	w.Str(res.Blocking)
	w.Bool(res.Holds)
	return append(w.B, wire.EncodeReserveResult(ToWireReserveResult(res))...)
}

// decodeResult decodes a result encoded by encodeResult.
func decodeResult(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, wire.ErrMalformed
	}
	p := b[1:]
	switch b[0] {
	case resultReserve:
		res, err := wire.DecodeReserveResult(p)
		return fromWireResult(res), err
	case resultSession:
		res, err := wire.DecodeSessionResult(p)
		return fromWireSession(res), err
	case resultPut:
		r := wire.Dec{B: p}
		res := fsm.PutResult{Version: r.Uvar(), Created: r.Bool(), Detail: r.Str()}
		return res, r.Done()
	case resultDelete:
		r := wire.Dec{B: p}
		res := fsm.DeleteResult{Existed: r.Bool(), Detail: r.Str()}
		return res, r.Done()
	case resultReserveTracked:
		return decodeTracked(wire.Dec{B: p})
	case resultReserveDecided, resultReserveHeld, resultReserveHoldEnd:
		return decodeDecided(wire.Dec{B: p}, b[0])
	case resultSettle:
		r := wire.Dec{B: p}
		res := fsm.SettleResult{Status: fsm.SettleStatus(r.Uvar()), Duplicate: r.Bool(), Detail: r.Str()}
		k := r.Uvar()
		if k > fsm.MaxReserveParts {
			return nil, fmt.Errorf("%w: %d settled parts", wire.ErrMalformed, k)
		}
		for range k {
			sp := fsm.SettledPart{Limit: r.Str()}
			sp.Reserved, sp.Actual, sp.Refunded, sp.Charged = int64(r.Uvar()), int64(r.Uvar()), int64(r.Uvar()), int64(r.Uvar())
			res.Parts = append(res.Parts, sp)
		}
		return res, r.Done()
	case resultRelease:
		r := wire.Dec{B: p}
		res := fsm.ReleaseResult{Status: fsm.SettleStatus(r.Uvar()), Duplicate: r.Bool(), Detail: r.Str()}
		res.Released = int64(r.Uvar())
		return res, r.Done()
	case resultExpiredGrants:
		r := wire.Dec{B: p}
		counted := r.Uvar()
		if r.Err() == nil && counted > fsm.MaxExpiredGrants*fsm.MaxReserveParts {
			return nil, fmt.Errorf("%w: %d expired parts counted", wire.ErrMalformed, counted)
		}
		return fsm.ExpiredGrantsResult{Counted: int(counted)}, r.Done()
	case resultLease:
		return decodeLeaseResult(p)
	case resultLeasePolicy:
		return decodeLeasePolicyResult(p)
	}
	return nil, fmt.Errorf("%w: result tag %d", wire.ErrMalformed, b[0])
}

// decodeDecided decodes a decidedReserve of tag: its index, its held
// time (resultReserveDecided has none: the follower then counts the
// expiry from its sending of the call), its hold's end
// (resultReserveHoldEnd; else, for a grant that holds, its expiry, which
// is never later) and its tracked result.
func decodeDecided(r wire.Dec, tag byte) (decidedReserve, error) {
	d := decidedReserve{index: r.Uvar()}
	if tag != resultReserveDecided {
		held := r.Uvar()
		if r.Err() == nil && held > math.MaxInt64 {
			return decidedReserve{}, fmt.Errorf("%w: held %d ns", wire.ErrMalformed, held)
		}
		d.held = time.Duration(held)
	}
	var holdEnd int64
	if tag == resultReserveHoldEnd {
		holdEnd = r.Svar()
	}
	if err := r.Err(); err != nil {
		return decidedReserve{}, err
	}
	var err error
	d.res, err = decodeTracked(r)
	switch {
	case tag == resultReserveHoldEnd:
		d.res.HoldExpiresInNanos = holdEnd
	case d.res.Holds && d.res.Status == fsm.Granted:
		d.res.HoldExpiresInNanos = d.res.ExpiresInNanos
	}
	return d, err
}

// decodeTracked decodes a reserve result with its reservation fields.
func decodeTracked(r wire.Dec) (fsm.ReserveResult, error) {
	id, blocking, holds := r.Uvar(), r.Str(), r.Bool()
	if err := r.Err(); err != nil {
		return fsm.ReserveResult{}, err
	}
	res, err := wire.DecodeReserveResult(r.B)
	out := fromWireResult(res)
	out.ReservationID, out.Blocking, out.Holds = id, blocking, holds
	return out, err
}

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
	}
	return w.B, nil
}

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

func encodeStrings(ss ...string) []byte {
	var w wire.Enc
	for _, s := range ss {
		w.Str(s)
	}
	return w.B
}

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
func encodeLeaseResult(res fsm.LeaseResult) []byte {
	return wire.EncodeLeaseResult(ToWireLeaseResult(res))
}

// decodeLeaseResult decodes what encodeLeaseResult encoded.
func decodeLeaseResult(b []byte) (fsm.LeaseResult, error) {
	res, err := wire.DecodeLeaseResult(b)
	return fromWireLeaseResult(res), err
}

func encodeLeasePolicyResult(res fsm.LeasePolicyResult) []byte {
	var w wire.Enc
	w.Bool(res.Applied)
	w.Bool(res.UnknownLimit)
	w.Svar(res.BurstPermits)
	w.Svar(res.MaxOutstandingPermits)
	w.Str(res.Detail)
	return w.B
}

func decodeLeasePolicyResult(b []byte) (fsm.LeasePolicyResult, error) {
	r := wire.Dec{B: b}
	res := fsm.LeasePolicyResult{Applied: r.Bool(), UnknownLimit: r.Bool(), BurstPermits: r.Svar(),
		MaxOutstandingPermits: r.Svar(), Detail: r.Str()}
	return res, r.Done()
}

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
