package fsm

import (
	"fmt"
	"math"

	"github.com/permitd/permitd/bucket"
)

// decode.go: Decode, the inverse of the Append functions (encode.go,
// leasecodec.go, expiredgrants.go). It checks every field as they do, so
// that an entry decodes only if they could have produced it.

// minReserveLen is the smallest encoding of one reserve (one-byte name,
// permits, max wait, arrival delta, key byte); it bounds preallocation for
// a claimed count.
const minReserveLen = 6

// Decode decodes and validates one log entry. It never panics; every error
// wraps ErrDecode (the bytes are not an entry of this encoding: truncated,
// trailing bytes, unknown type or version, non-canonical varint) or
// ErrInvalidCommand (well-formed but invalid: bad name, zero permits, bad
// config, too many reserves). An entry that decodes re-encodes to exactly
// the same bytes with the matching Append function.
func Decode(b []byte) (Entry, error) {
	var e Entry
	if _, err := decodeInto(b, &e, nil); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// inReserve adds the position of a reserve in its batch to err.
func inReserve(err error, i, n int) error {
	return fmt.Errorf("%w (reserve %d of %d in the batch)", err, i, n)
}

// interner turns decoded name bytes into strings, reusing the string of an
// existing limit or of the previous name, so that applying a batch does not
// allocate a string per reserve. A nil interner allocates.
type interner struct {
	limits map[string]*limit
	last   string
}

func (in *interner) name(b []byte) string {
	if in == nil {
		return string(b)
	}
	if in.last == string(b) {
		return in.last
	}
	if l, ok := in.limits[string(b)]; ok {
		in.last = l.name
	} else {
		in.last = string(b)
	}
	return in.last
}

// putParts is what decoding a put yields besides PutLimit: the config's
// canonical bytes (a sub-slice of the entry) and the config as decoded,
// compiled once, which Apply builds or reconfigures the pacer with.
type putParts struct {
	rawConfig []byte
	config    bucket.Compiled
}

// decodeInto decodes b into e, reusing e.Reserves' storage. For a put it
// also returns the putParts.
func decodeInto(b []byte, e *Entry, names *interner) (put putParts, err error) {
	reserves, batch := e.Reserves[:0], e.LeaseBatch[:0]
	*e = Entry{Reserves: reserves, LeaseBatch: batch}
	r := reader{b: b, what: "log entry"}
	t := CommandType(r.byte1("command type"))
	v := r.byte1("encoding version")
	if r.err != nil {
		return putParts{}, r.err
	}
	if t < CmdPutLimit || t > lastCommandType {
		r.fail("unknown command type %d (known: %d-%d)", t, CmdPutLimit, lastCommandType)
		return putParts{}, r.err
	}
	if v != EncodingVersion {
		r.fail("encoding version %d of command type %d is not supported (supported: %d)", v, t, EncodingVersion)
		return putParts{}, r.err
	}
	e.Type = t
	e.Stamp.Nanos = int64(r.uint64BE("timestamp"))
	e.Stamp.Term = r.uint64BE("stamp term")
	if r.err != nil {
		return putParts{}, r.err
	}
	switch t {
	case CmdPutLimit:
		put, err = decodePut(&r, &e.Put)
	case CmdDeleteLimit:
		e.Delete.Name, err = decodeName(&r, names)
		e.Delete.Force = r.bool1("force")
	case CmdReserveBatch:
		e.Reserves, err = decodeReserves(&r, reserves, names, e.Stamp.Nanos)
	case CmdPutLeasePolicy:
		err = decodeLeasePolicy(&r, &e.Policy, names)
	case CmdLease:
		err = decodeLease(&r, &e.Lease, names)
	case CmdRenew:
		err = decodeRenew(&r, &e.Renew, names)
	case CmdReturn:
		err = decodeReturn(&r, &e.Return, names)
	case CmdLeaseBatch:
		e.LeaseBatch, err = decodeLeaseBatch(&r, batch, names, e.Stamp.Nanos)
	case CmdSettle:
		err = decodeSettle(&r, &e.Settle, names)
	case CmdOpenSession:
		if r.remaining() > 0 {
			e.OpenSession.PerOwner = int(r.uvarintMax("sessions per owner", MaxSessions))
			e.OpenSession.Owner = string(r.bytes("owner", MaxOwnerLen))
			if r.err == nil && e.OpenSession == (OpenSession{}) {
				r.fail("an empty owner and quota (a session without either carries nothing)")
			}
		}
	case CmdExpiredGrants:
		e.ExpiredGrants, err = decodeExpiredGrants(&r, names)
	case CmdRelease:
		e.Release.Reservation = r.uvarint("reservation")
		e.Release.Owner = string(r.bytes("owner", MaxOwnerLen))
		if r.err == nil {
			err = e.Release.Validate()
		}
	case CmdPutTemplate:
		put, err = decodePutTemplate(&r, &e.PutTemplate)
	case CmdDeleteTemplate:
		e.DeleteTemplate.Prefix = string(r.bytes("template prefix", MaxTemplatePrefixLen))
		if r.err == nil {
			err = e.DeleteTemplate.Validate()
		}
	case CmdWithdraw:
		e.Withdraw.RequestID = string(r.bytes("request id", MaxRequestIDLen))
		e.Withdraw.Owner = string(r.bytes("owner", MaxOwnerLen))
		switch flag := r.byte1("force"); {
		case r.err != nil:
		case flag > withdrawGrace:
			r.fail("force byte %d (allowed: 0, 1, or %d followed by a grace)", flag, withdrawGrace)
		case flag == withdrawGrace:
			e.Withdraw.GraceNanos = int64(r.uvarintMax("withdraw grace", uint64(MaxWithdrawGraceNanos)))
			if r.err == nil && e.Withdraw.GraceNanos == 0 {
				r.fail("withdraw grace 0 after flag %d (a withdrawal without a grace has flag 0)", withdrawGrace)
			}
			if r.err == nil {
				err = e.Withdraw.Validate()
			}
		default:
			e.Withdraw.Force = flag == 1
			err = e.Withdraw.Validate()
		}
	}
	if err == nil {
		r.end()
		err = r.err
	}
	if err != nil {
		*e = Entry{Reserves: reserves[:0], LeaseBatch: batch[:0]}
		return putParts{}, err
	}
	return put, nil
}

// decodeName reads and validates a limit name.
func decodeName(r *reader, names *interner) (string, error) {
	nb := r.bytes("limit name", MaxNameLen)
	if r.err != nil {
		return "", r.err
	}
	if err := validateName(nb); err != nil {
		return "", err
	}
	return names.name(nb), nil
}

func decodePut(r *reader, p *PutLimit) (putParts, error) {
	name, err := decodeName(r, nil)
	if err != nil {
		return putParts{}, err
	}
	raw := r.bytes("config", MaxConfigBytes)
	if r.err != nil {
		return putParts{}, r.err
	}
	cfg, err := decodeConfig(name, raw)
	if err != nil {
		return putParts{}, err
	}
	p.Name, p.Config = name, cfg.Config()
	if r.remaining() > 0 {
		switch flag := r.byte1("shadow"); flag {
		case 1:
			p.Shadow = true
		default:
			r.fail("shadow byte %d (allowed: 1, or nothing when not in shadow mode)", flag)
			return putParts{}, r.err
		}
	}
	return putParts{rawConfig: raw, config: cfg}, nil
}

func decodePutTemplate(r *reader, t *PutTemplate) (putParts, error) {
	prefix := r.bytes("template prefix", MaxTemplatePrefixLen)
	raw := r.bytes("config", MaxConfigBytes)
	if r.err != nil {
		return putParts{}, r.err
	}
	if err := validatePrefix(prefix); err != nil {
		return putParts{}, err
	}
	t.Prefix = string(prefix)
	cfg, err := decodeConfig(t.Prefix, raw)
	if err != nil {
		return putParts{}, err
	}
	t.Config = cfg.Config()
	t.IdleNanos = int64(r.uvarintMax("idle nanos", uint64(MaxTemplateIdleNanos)))
	t.MaxKeys = int64(r.uvarintMax("max keys", MaxTemplatedKeys))
	if r.err != nil {
		return putParts{}, r.err
	}
	if err := t.Validate(); err != nil {
		return putParts{}, err
	}
	return putParts{rawConfig: raw, config: cfg}, nil
}

func decodeReserves(r *reader, rs []Reserve, names *interner, stampNanos int64) ([]Reserve, error) {
	n := r.uvarint("batch count")
	if r.err != nil {
		return rs, r.err
	}
	if err := validateBatchLen(n); err != nil {
		return rs, err
	}
	count := int(n)
	if want := min(count, r.remaining()/minReserveLen); cap(rs) < want {
		rs = make([]Reserve, 0, want)
	}
	r.unit = "reserve"
	arrived := stampNanos
	for i := range count {
		r.index = i
		name, err := decodeName(r, names)
		if err != nil {
			return rs, inReserve(err, i, count)
		}
		permits := r.uvarint("permits")
		maxWait := r.uvarint("max wait")
		delta := r.uvarint("arrival delta")
		res := Reserve{Limit: name}
		key := r.byte1("key")
		if key == keyNone|keyTracked || key == keyRequestID|keyTracked {
			res.Track = true
			key &^= keyTracked
		}
		switch key {
		case keyNone:
		case keyRequestID:
			id := r.bytes("request id", MaxRequestIDLen)
			if r.err == nil && len(id) == 0 {
				r.fail("empty request id after key byte %d (an empty id is key %d)", keyRequestID, keyNone)
			}
			if len(id) > 0 {
				res.RequestID = string(id)
			}
		case keySession, keyOwnedSession:
			res.Session = SessionRef{ID: r.uvarint("session id"), Seq: r.uvarint("session seq"), AckedBelow: r.uvarint("session acked below")}
			if r.err == nil && res.Session.ID == 0 {
				r.fail("session id 0 after key byte %d (no session is key %d)", key, keyNone)
			}
			if key == keyOwnedSession {
				res.Owner = string(r.bytes("owner", MaxOwnerLen))
				if r.err == nil && res.Owner == "" {
					r.fail("empty owner after key byte %d (a session's reserve without an owner is key %d)", keyOwnedSession, keySession)
				}
			}
		default:
			r.fail("key byte %d (allowed: %d none, %d request id, %d session, %d session with an owner; %d and %d with %d for the reservation form)",
				key, keyNone, keyRequestID, keySession, keyOwnedSession, keyNone|keyTracked, keyRequestID|keyTracked, keyTracked)
		}
		if r.err == nil && res.Track {
			decodeTracked(r, &res, names)
		}
		if r.err != nil {
			return rs, r.err
		}
		if permits > math.MaxInt64 || maxWait > math.MaxInt64 || delta > uint64(math.MaxInt64-arrived) {
			return rs, inReserve(fmt.Errorf("%w: reserve on limit %q: permits %d, max wait %dns or arrival %d+%dns exceeds the int64 range",
				ErrInvalidCommand, name, permits, maxWait, arrived, delta), i, count)
		}
		arrived += int64(delta)
		res.Permits, res.MaxWaitNanos, res.ArrivedNanos = int64(permits), int64(maxWait), arrived
		if err := validateReserveNumbers(&res); err != nil {
			return rs, inReserve(err, i, count)
		}
		rs = append(rs, res)
	}
	r.unit = ""
	return rs, nil
}

// decodeTracked reads the reservation-form fields of a reserve (after its
// key).
func decodeTracked(r *reader, res *Reserve, names *interner) {
	n := r.uvarintMax("also count", MaxReserveParts-1)
	if r.err != nil {
		return
	}
	if n > 0 {
		res.Also = make([]Part, 0, int(n))
	}
	for range int(n) {
		name, err := decodeName(r, names)
		if err != nil {
			r.failErr(err)
			return
		}
		permits := r.uvarint("permits")
		if r.err == nil && permits > math.MaxInt64 {
			r.fail("permits %d exceed the int64 range", permits)
		}
		res.Also = append(res.Also, Part{Limit: name, Permits: int64(permits)})
	}
	res.SettleWithinNanos = int64(r.uvarintMax("settle window", uint64(MaxSettleWindowNanos)))
	res.Owner = string(r.bytes("owner", MaxOwnerLen))
}

// decodeSettle reads a CmdSettle's fields and validates them.
func decodeSettle(r *reader, c *Settle, names *interner) error {
	c.Reservation = r.uvarint("reservation")
	c.RequestID = string(r.bytes("request id", MaxRequestIDLen))
	c.Owner = string(r.bytes("owner", MaxOwnerLen))
	n := r.uvarintMax("actual count", MaxReserveParts)
	if r.err != nil {
		return r.err
	}
	for range int(n) {
		name, err := decodeName(r, names)
		if err != nil {
			return err
		}
		permits := r.uvarint("permits")
		if r.err != nil {
			return r.err
		}
		if permits > math.MaxInt64 {
			r.fail("permits %d exceed the int64 range", permits)
			return r.err
		}
		c.Actual = append(c.Actual, Part{Limit: name, Permits: int64(permits)})
	}
	return c.Validate()
}
