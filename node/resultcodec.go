package node

import (
	"fmt"
	"math"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// resultcodec.go: what the leader answers a forwarded command (see
// command.go): the register's result, in one tagged codec (encodeResult,
// decodeResult), and the conversions of the register's results to and
// from package wire's vocabulary. The results a binary client also reads
// (a reserve's, a session's, a lease command's) travel in package wire's
// encoding of them, the one codec. Every number is a varint, every name a
// length-prefixed string; decoding is bounded by the frame and never
// panics. The views a follower reads through the leader are viewcodec.go's.

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
	resultPutTemplate
	resultDeleteTemplate
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
	case fsm.PutTemplateResult:
		w := wire.Enc{B: []byte{resultPutTemplate}}
		w.Bool(res.Created)
		w.Str(res.Detail)
		return w.B, nil
	case fsm.DeleteTemplateResult:
		w := wire.Enc{B: []byte{resultDeleteTemplate}}
		w.Bool(res.Existed)
		w.Uvar(uint64(res.LiveKeys))
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
	case resultPutTemplate:
		r := wire.Dec{B: p}
		res := fsm.PutTemplateResult{Created: r.Bool(), Detail: r.Str()}
		return res, r.Done()
	case resultDeleteTemplate:
		r := wire.Dec{B: p}
		res := fsm.DeleteTemplateResult{Existed: r.Bool()}
		if k := r.Uvar(); k <= fsm.MaxTemplatedKeys {
			res.LiveKeys = int64(k)
		} else {
			return nil, fmt.Errorf("%w: %d live keys", wire.ErrMalformed, k)
		}
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

// The register's results in the binary protocol's vocabulary (package
// wire, which clients speak without the server's packages) and back: the
// codec above uses them, and the server's binary edge answers its clients
// with them. The numberings of
// the statuses are the register's (TestWireStatusesAreTheRegisters,
// TestWireLeaseStatusesAreTheRegisters). A client's requests are read
// into the register's commands by the edge (package transport/server).

// ToWireReserveResult is the register's reserve result in the protocol's
// vocabulary, as a binary client or a forwarding follower reads it; what
// does not travel (NowNanos, OnArrival, the reservation's fields) is
// dropped.
func ToWireReserveResult(res fsm.ReserveResult) wire.ReserveResult {
	return wire.ReserveResult{Status: wire.ReserveStatus(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

func fromWireResult(res wire.ReserveResult) fsm.ReserveResult {
	return fsm.ReserveResult{Status: fsm.ReserveStatus(res.Status), WaitNanos: res.WaitNanos, RetryAfterNanos: res.RetryAfterNanos,
		ExpiresInNanos: res.ExpiresInNanos, SpacingNanos: res.SpacingNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

// ToWireSessionResult is the register's answer to the opening of a
// session in the protocol's vocabulary.
func ToWireSessionResult(res fsm.SessionResult) wire.SessionResult {
	return wire.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
}

func fromWireSession(res wire.SessionResult) fsm.SessionResult {
	return fsm.SessionResult{ID: res.ID, IdleNanos: res.IdleNanos, RetryAfterNanos: res.RetryAfterNanos, Detail: res.Detail}
}

// ToWireLeaseResult is the register's lease outcome as the protocol's.
func ToWireLeaseResult(res fsm.LeaseResult) wire.LeaseResult {
	return wire.LeaseResult{Status: wire.LeaseStatus(res.Status), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilli: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits,
		RetryAfterNanos: res.RetryAfterNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}

// fromWireLeaseResult is a lease outcome read in the protocol's
// vocabulary (the leader's answer to a forwarded lease command).
func fromWireLeaseResult(res wire.LeaseResult) fsm.LeaseResult {
	return fsm.LeaseResult{Status: fsm.LeaseStatus(res.Status), LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresInNanos: res.ExpiresInNanos, ShareMilliPermitsPerSec: res.ShareMilli, CreditedPermits: res.CreditedPermits,
		RetryAfterNanos: res.RetryAfterNanos, Duplicate: res.Duplicate, Detail: res.Detail}
}
