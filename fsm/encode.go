package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/permitd/permitd/bucket"
)

// encode.go: the layout of a log entry and the Append functions of the
// limit, reserve, session, settlement and withdrawal commands (the lease
// commands' are in leasecodec.go, CmdExpiredGrants' in expiredgrants.go).
//
// Log entry layout (all commands):
//
//	byte 0      CommandType
//	byte 1      EncodingVersion
//	bytes 2-9   Stamp.Nanos, int64 big-endian (the leader's cluster time)
//	bytes 10-17 Stamp.Term, uint64 big-endian (the term it was stamped in)
//	...         the command:
//
//	CmdPutLimit      name, config (uvarint length + bucket.Config.AppendBinary),
//	                 then byte 1 if Shadow (nothing if not)
//	CmdDeleteLimit   name, byte force (0 or 1)
//	CmdReserveBatch  uvarint count (1..MaxBatchReserves), then per reserve:
//	                 limit name, uvarint permits (>= 1), uvarint max wait
//	                 nanos, uvarint arrival delta (ArrivedNanos minus the
//	                 previous reserve's, the first's minus Stamp.Nanos),
//	                 byte key: 0 none, 1 request id (1..MaxRequestIDLen
//	                 bytes), 2 session (uvarint id, seq, acked below; the
//	                 empty owner), 3 owned session (the same, then the
//	                 owner, 1..MaxOwnerLen bytes);
//	                 key | 0x80 marks the reservation form (Track, keys 0
//	                 and 1 only), followed after the key by uvarint
//	                 count of Also (0..MaxReserveParts-1), each limit name
//	                 and uvarint permits, uvarint settle window nanos
//	                 (0..MaxSettleWindowNanos), owner (0..MaxOwnerLen)
//	CmdNoop          nothing
//	CmdOpenSession   nothing (no owner, no quota), or uvarint per owner
//	                 (0..MaxSessions) and owner (0..MaxOwnerLen), not
//	                 both empty
//	CmdLease, CmdRenew, CmdReturn, CmdPutLeasePolicy: see leasecodec.go
//	CmdLeaseBatch: see leasecodec.go
//	CmdSettle        uvarint reservation, request id (0..MaxRequestIDLen),
//	                 owner, uvarint count (0..MaxReserveParts), each limit
//	                 name and uvarint permits (>= 0)
//	CmdRelease       uvarint reservation, owner
//	CmdExpiredGrants uvarint count (1..MaxExpiredGrants), then per grant:
//	                 uvarint decided index (>= 1), uvarint part count
//	                 (1..MaxReserveParts), each limit name (each once) and
//	                 uvarint permits (>= 1)
//	CmdWithdraw      request id (1..MaxRequestIDLen), owner, byte force (0
//	                 or 1)
//	CmdPutTemplate   prefix, config (as CmdPutLimit's), uvarint idle nanos,
//	                 uvarint max keys
//	CmdDeleteTemplate prefix
//
// Names and ids are uvarint-length-prefixed bytes; varints are in shortest
// form. Nothing may follow the command.

// headerLen is the length of the type, version and stamp prefix.
const headerLen = 18

// Key bytes of a reserve in a CmdReserveBatch.
const (
	keyNone      = 0
	keyRequestID = 1
	keySession   = 2
	// keyOwnedSession is keySession followed by the reserve's owner (not
	// empty): a session's reserve without an owner is keySession, as
	// before owners were sent, so such entries keep their bytes.
	keyOwnedSession = 3
	// keyTracked is or-ed into the key byte of a reserve in the
	// reservation form.
	keyTracked = 0x80
)

// appendHeader appends the type, version and stamp of an entry.
func appendHeader(b []byte, t CommandType, st Stamp) []byte {
	b = append(b, byte(t), EncodingVersion)
	b = appendUint64(b, uint64(st.Nanos))
	return appendUint64(b, st.Term)
}

// appendChecked appends to b the entry of command t stamped st that
// carries q, once q.Validate accepts it: the header, then what payload
// appends of q. On error b is returned unchanged (with the error of
// Validate, which wraps ErrInvalidCommand).
func appendChecked[T interface{ Validate() error }](b []byte, t CommandType, st Stamp, q T, payload func([]byte, T) []byte) ([]byte, error) {
	if err := q.Validate(); err != nil {
		return b, err
	}
	return payload(appendHeader(b, t, st), q), nil
}

// AppendNoop appends a CmdNoop entry stamped st to b. A new leader writes
// one to continue the cluster timeline.
func AppendNoop(b []byte, st Stamp) []byte {
	return appendHeader(b, CmdNoop, st)
}

// AppendOpenSession appends a CmdOpenSession entry stamped st to b: a
// session without an owner or a quota.
func AppendOpenSession(b []byte, st Stamp) []byte {
	return appendHeader(b, CmdOpenSession, st)
}

// AppendOpenSessionAs appends a CmdOpenSession entry stamped st that opens
// a session for o (its owner and quota; the zero OpenSession encodes as
// AppendOpenSession does). On error b is returned unchanged and the error
// wraps ErrInvalidCommand.
func AppendOpenSessionAs(b []byte, st Stamp, o OpenSession) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return b, err
	}
	b = appendHeader(b, CmdOpenSession, st)
	if o == (OpenSession{}) {
		return b, nil
	}
	b = binary.AppendUvarint(b, uint64(o.PerOwner))
	return appendBytes(b, o.Owner), nil
}

// AppendPutTemplate appends a CmdPutTemplate entry to b. On error b is
// returned unchanged and the error wraps ErrInvalidCommand.
func AppendPutTemplate(b []byte, st Stamp, t PutTemplate) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return b, err
	}
	raw, err := t.Config.AppendBinary(nil)
	if err != nil {
		return b, fmt.Errorf("%w: template %q: %v", ErrInvalidCommand, t.Prefix, err)
	}
	if len(raw) > MaxConfigBytes {
		return b, fmt.Errorf("%w: template %q: config is %d bytes encoded (allowed: at most %d)", ErrInvalidCommand, t.Prefix, len(raw), MaxConfigBytes)
	}
	b = appendHeader(b, CmdPutTemplate, st)
	b = appendBytes(b, t.Prefix)
	b = appendBytes(b, string(raw))
	b = binary.AppendUvarint(b, uint64(t.IdleNanos))
	return binary.AppendUvarint(b, uint64(t.MaxKeys)), nil
}

// AppendDeleteTemplate appends a CmdDeleteTemplate entry to b. On error b
// is returned unchanged and the error wraps ErrInvalidCommand.
func AppendDeleteTemplate(b []byte, st Stamp, d DeleteTemplate) ([]byte, error) {
	return appendChecked(b, CmdDeleteTemplate, st, d, func(b []byte, d DeleteTemplate) []byte {
		return appendBytes(b, d.Prefix)
	})
}

// AppendDelete appends a CmdDeleteLimit entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendDelete(b []byte, st Stamp, d DeleteLimit) ([]byte, error) {
	if err := validateName(d.Name); err != nil {
		return b, err
	}
	b = appendHeader(b, CmdDeleteLimit, st)
	b = appendBytes(b, d.Name)
	if d.Force {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

// AppendReserveBatch appends a CmdReserveBatch entry carrying rs, in order, to
// b. Every reserve must pass Reserve.Validate and the batch must hold 1 to
// MaxBatchReserves reserves. Arrival times are made non-decreasing (an
// ArrivedNanos before the previous reserve's, or before st.Nanos for the
// first, counts as that one), so an entry it produces decodes to reserves
// whose ArrivedNanos are exactly the times Apply decides them at (before
// the clamp to the timeline). On error b is returned unchanged and the
// error (wrapping ErrInvalidCommand) names the offending reserve. It
// allocates nothing beyond growing b.
func AppendReserveBatch(b []byte, st Stamp, rs []Reserve) ([]byte, error) {
	if err := validateBatchLen(uint64(len(rs))); err != nil {
		return b, err
	}
	for i := range rs {
		if err := rs[i].Validate(); err != nil {
			return b, inReserve(err, i, len(rs))
		}
	}
	b = appendHeader(b, CmdReserveBatch, st)
	b = binary.AppendUvarint(b, uint64(len(rs)))
	prev := st.Nanos
	for i := range rs {
		r := &rs[i]
		b = appendBytes(b, r.Limit)
		b = binary.AppendUvarint(b, uint64(r.Permits))
		b = binary.AppendUvarint(b, uint64(r.MaxWaitNanos))
		arrived := max(prev, r.ArrivedNanos)
		b = binary.AppendUvarint(b, uint64(arrived-prev)) // >= 0; wraps only for stamps 2^63 apart, which decoding rejects
		prev = arrived
		var tracked byte
		if r.Track {
			tracked = keyTracked
		}
		switch {
		case r.RequestID != "":
			b = append(b, keyRequestID|tracked)
			b = appendBytes(b, r.RequestID)
		case r.Session.ID != 0:
			key := byte(keySession)
			if r.Owner != "" {
				key = keyOwnedSession
			}
			b = append(b, key)
			b = binary.AppendUvarint(b, r.Session.ID)
			b = binary.AppendUvarint(b, r.Session.Seq)
			b = binary.AppendUvarint(b, r.Session.AckedBelow)
			if key == keyOwnedSession {
				b = appendBytes(b, r.Owner)
			}
		default:
			b = append(b, keyNone|tracked)
		}
		if r.Track {
			b = binary.AppendUvarint(b, uint64(len(r.Also)))
			for _, p := range r.Also {
				b = appendBytes(b, p.Limit)
				b = binary.AppendUvarint(b, uint64(p.Permits))
			}
			b = binary.AppendUvarint(b, uint64(r.SettleWithinNanos))
			b = appendBytes(b, r.Owner)
		}
	}
	return b, nil
}

// AppendPut appends a CmdPutLimit entry to b. The name must be valid and the
// config must be one Compile produced: Config.AppendBinary checks it (by
// compiling its Spec again, the one compile of a put before it is
// replicated), and encodes only what DecodeConfig decodes, so that an entry
// AppendPut accepts is never rejected by Apply. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendPut(b []byte, st Stamp, p PutLimit) ([]byte, error) {
	if err := validateName(p.Name); err != nil {
		return b, err
	}
	in := b
	b = appendHeader(b, CmdPutLimit, st)
	b = appendBytes(b, p.Name)
	cfgStart := len(b)
	b, err := p.Config.AppendBinary(b)
	if err == nil && len(b) < cfgStart {
		err = fmt.Errorf("AppendBinary shortened the buffer")
	}
	if err != nil {
		return in, fmt.Errorf("%w: limit %q: config cannot be encoded: %w", ErrInvalidCommand, p.Name, err)
	}
	// Insert the config length in front of the config bytes.
	n := len(b) - cfgStart
	if n > MaxConfigBytes {
		return in, fmt.Errorf("%w: limit %q: encoded config is %d bytes (allowed: at most %d)",
			ErrInvalidCommand, p.Name, n, MaxConfigBytes)
	}
	b = insertLen(b, cfgStart)
	if p.Shadow {
		b = append(b, 1)
	}
	return b, nil
}

// decodeConfig decodes the encoded config of limit name, compiling it once
// (bucket.DecodeCompiled): the pacers of a put or a snapshot are built on
// the result and reconfigured to it without compiling it again.
// DecodeCompiled accepts only the canonical encoding (AppendBinary of what
// it returns is raw), so every replica stores and snapshots the same bytes.
func decodeConfig(name string, raw []byte) (bucket.Compiled, error) {
	c, err := bucket.DecodeCompiled(raw)
	if err != nil {
		return bucket.Compiled{}, fmt.Errorf("%w: limit %q: config: %w", ErrInvalidCommand, name, err)
	}
	return c, nil
}

// AppendSettle appends a CmdSettle entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendSettle(b []byte, st Stamp, c Settle) ([]byte, error) {
	return appendChecked(b, CmdSettle, st, c, appendSettlePayload)
}

// appendSettlePayload appends a CmdSettle's payload (after the header).
func appendSettlePayload(b []byte, c Settle) []byte {
	b = binary.AppendUvarint(b, c.Reservation)
	b = appendBytes(b, c.RequestID)
	b = appendBytes(b, c.Owner)
	b = binary.AppendUvarint(b, uint64(len(c.Actual)))
	for _, p := range c.Actual {
		b = appendBytes(b, p.Limit)
		b = binary.AppendUvarint(b, uint64(p.Permits))
	}
	return b
}

// AppendRelease appends a CmdRelease entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendRelease(b []byte, st Stamp, c Release) ([]byte, error) {
	return appendChecked(b, CmdRelease, st, c, func(b []byte, c Release) []byte {
		b = binary.AppendUvarint(b, c.Reservation)
		return appendBytes(b, c.Owner)
	})
}

// AppendWithdraw appends a CmdWithdraw entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendWithdraw(b []byte, st Stamp, c Withdraw) ([]byte, error) {
	return appendChecked(b, CmdWithdraw, st, c, appendWithdrawPayload)
}

// appendWithdrawPayload appends a CmdWithdraw's payload (after the
// header).
func appendWithdrawPayload(b []byte, c Withdraw) []byte {
	b = appendBytes(b, c.RequestID)
	b = appendBytes(b, c.Owner)
	if c.GraceNanos > 0 {
		b = append(b, withdrawGrace)
		return binary.AppendUvarint(b, uint64(c.GraceNanos))
	}
	return append(b, boolByte(c.Force))
}

// withdrawGrace is the flag byte of a CmdWithdraw with a grace (0 and 1:
// without one, Force false and true), followed by uvarint the grace
// (1..MaxWithdrawGraceNanos).
const withdrawGrace = 2
