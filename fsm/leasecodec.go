package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// leasecodec.go: the log entries of the lease commands, one by one and in
// a CmdLeaseBatch: their Append functions and decoders.
//
// Payloads (after the common header; see encode.go). Numbers are uvarints
// in shortest form; names and ids are length-prefixed bytes.
//
//	CmdPutLeasePolicy  limit name, byte leased (0 or 1), burst permits,
//	                   max outstanding permits
//	CmdLease           limit name, holder, group, weight, demand (milli-
//	                   permits/s), TTL nanos, request id
//	CmdRenew           limit name, lease id, epoch, spent, stolen out,
//	                   stolen in, kept, demand, TTL nanos, request id
//	CmdReturn          limit name, lease id, epoch, spent, stolen out,
//	                   stolen in, request id

// AppendLeasePolicy appends a CmdPutLeasePolicy entry to b. On error b is
// returned unchanged and the error wraps ErrInvalidCommand.
func AppendLeasePolicy(b []byte, st Stamp, p LeasePolicy) ([]byte, error) {
	return appendChecked(b, CmdPutLeasePolicy, st, p, appendLeasePolicyPayload)
}

// AppendLease appends a CmdLease entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendLease(b []byte, st Stamp, q Lease) ([]byte, error) {
	return appendChecked(b, CmdLease, st, q, appendLeasePayload)
}

// AppendRenew appends a CmdRenew entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendRenew(b []byte, st Stamp, q Renew) ([]byte, error) {
	return appendChecked(b, CmdRenew, st, q, appendRenewPayload)
}

// AppendReturn appends a CmdReturn entry to b. On error b is returned
// unchanged and the error wraps ErrInvalidCommand.
func AppendReturn(b []byte, st Stamp, q Return) ([]byte, error) {
	return appendChecked(b, CmdReturn, st, q, appendReturnPayload)
}

// appendLeasePolicyPayload appends a CmdPutLeasePolicy's payload (after
// the header).
func appendLeasePolicyPayload(b []byte, p LeasePolicy) []byte {
	b = appendBytes(b, p.Limit)
	leased := byte(0)
	if p.Leased {
		leased = 1
	}
	b = append(b, leased)
	b = binary.AppendUvarint(b, uint64(p.BurstPermits))
	return binary.AppendUvarint(b, uint64(p.MaxOutstandingPermits))
}

// appendLeasePayload appends a CmdLease's payload (after the header).
func appendLeasePayload(b []byte, q Lease) []byte {
	b = appendBytes(b, q.Limit)
	b = appendBytes(b, q.Holder)
	b = appendBytes(b, q.Group)
	b = binary.AppendUvarint(b, uint64(q.Weight))
	b = binary.AppendUvarint(b, uint64(q.DemandMilliPermitsPerSec))
	b = binary.AppendUvarint(b, uint64(q.TTLNanos))
	return appendBytes(b, q.RequestID)
}

// appendRenewPayload appends a CmdRenew's payload (after the header).
func appendRenewPayload(b []byte, q Renew) []byte {
	b = appendReport(b, q.Report)
	b = binary.AppendUvarint(b, uint64(q.KeptPermits))
	b = binary.AppendUvarint(b, uint64(q.DemandMilliPermitsPerSec))
	b = binary.AppendUvarint(b, uint64(q.TTLNanos))
	return appendBytes(b, q.RequestID)
}

// appendReturnPayload appends a CmdReturn's payload (after the header).
func appendReturnPayload(b []byte, q Return) []byte {
	b = appendReport(b, q.Report)
	return appendBytes(b, q.RequestID)
}

func appendReport(b []byte, r Report) []byte {
	b = appendBytes(b, r.Limit)
	b = binary.AppendUvarint(b, r.LeaseID)
	b = binary.AppendUvarint(b, r.Epoch)
	b = binary.AppendUvarint(b, uint64(r.SpentPermits))
	b = binary.AppendUvarint(b, uint64(r.StolenOutPermits))
	return binary.AppendUvarint(b, uint64(r.StolenInPermits))
}

// firstErr is the reader's error if it has one (a field did not decode),
// else bad (a field decoded to a value out of its range), else nil.
func (r *reader) firstErr(bad error) error {
	if r.err != nil {
		return r.err
	}
	return bad
}

// int64Field reads a uvarint that must fit in int64; a larger value is an
// invalid command (it could never have been encoded from an int64 field).
func (r *reader) int64Field(field string, errp *error) int64 {
	v := r.uvarint(field)
	if r.err == nil && *errp == nil && v > math.MaxInt64 {
		*errp = fmt.Errorf("%w: %s %d exceeds the int64 range", ErrInvalidCommand, field, v)
	}
	return int64(v)
}

func decodeLeasePolicy(r *reader, p *LeasePolicy, names *interner) error {
	name, err := decodeName(r, names)
	if err != nil {
		return err
	}
	leased := r.bool1("leased")
	var bad error
	burst := r.int64Field("burst permits", &bad)
	maxOut := r.int64Field("max outstanding permits", &bad)
	if err := r.firstErr(bad); err != nil {
		return err
	}
	*p = LeasePolicy{Limit: name, Leased: leased, BurstPermits: burst, MaxOutstandingPermits: maxOut}
	return p.Validate()
}

func decodeLease(r *reader, q *Lease, names *interner) error {
	name, err := decodeName(r, names)
	if err != nil {
		return err
	}
	holder := r.bytes("holder", MaxNameLen)
	group := r.bytes("group", MaxNameLen)
	var bad error
	weight := r.int64Field("weight", &bad)
	demand := r.int64Field("demand", &bad)
	ttl := r.int64Field("TTL", &bad)
	id := r.bytes("request id", MaxRequestIDLen)
	if err := r.firstErr(bad); err != nil {
		return err
	}
	if err := validateLabel("holder", name, holder); err != nil {
		return err
	}
	if err := validateLabel("group", name, group); err != nil {
		return err
	}
	*q = Lease{Limit: name, Holder: string(holder), Group: string(group), Weight: weight,
		DemandMilliPermitsPerSec: demand, TTLNanos: ttl, RequestID: optString(id)}
	return q.Validate()
}

// report reads the fields a renew and a return share: the lease, its epoch
// and what the holder reports of its grant (the first bad number in bad).
func (r *reader) report(limit string, bad *error) Report {
	return Report{Limit: limit, LeaseID: r.uvarint("lease id"), Epoch: r.uvarint("epoch"),
		SpentPermits: r.int64Field("spent permits", bad), StolenOutPermits: r.int64Field("stolen out permits", bad),
		StolenInPermits: r.int64Field("stolen in permits", bad)}
}

func decodeRenew(r *reader, q *Renew, names *interner) error {
	name, err := decodeName(r, names)
	if err != nil {
		return err
	}
	var bad error
	rep := r.report(name, &bad)
	kept := r.int64Field("kept permits", &bad)
	demand := r.int64Field("demand", &bad)
	ttl := r.int64Field("TTL", &bad)
	id := r.bytes("request id", MaxRequestIDLen)
	if err := r.firstErr(bad); err != nil {
		return err
	}
	*q = Renew{Report: rep, KeptPermits: kept, DemandMilliPermitsPerSec: demand, TTLNanos: ttl, RequestID: optString(id)}
	return q.Validate()
}

func decodeReturn(r *reader, q *Return, names *interner) error {
	name, err := decodeName(r, names)
	if err != nil {
		return err
	}
	var bad error
	rep := r.report(name, &bad)
	id := r.bytes("request id", MaxRequestIDLen)
	if err := r.firstErr(bad); err != nil {
		return err
	}
	*q = Return{Report: rep, RequestID: optString(id)}
	return q.Validate()
}

// optString returns b as a string, or "" without allocating.
func optString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

// CmdLeaseBatch: several lease commands in one log entry.
//
// A fleet renews once per worker per renewal period; one entry per
// renewal costs the leader a disk commit and a replication round each
// (most of its CPU per renewal at a thousand workers). The leader's lease
// batcher groups the lease, renew and return commands that arrive while
// earlier ones commit into one entry, as reserves are grouped, and each
// carries the cluster time it reached the leader: Apply decides each at
// its own arrival, exactly as if it had been applied alone in an entry
// stamped then (the batch shares an fsync, never an instant).
//
//	CmdLeaseBatch  uvarint count (1..MaxBatchLeaseCommands), then per
//	               command: byte kind (CmdLease, CmdRenew or CmdReturn),
//	               uvarint arrival delta (ArrivedNanos minus the previous
//	               command's, the first's minus Stamp.Nanos), then the
//	               kind's payload as above

// minLeaseCommandLen is the smallest encoding of one batched command
// (kind, delta, and a return's shortest payload); it bounds preallocation
// for a claimed count.
const minLeaseCommandLen = 9

// inLeaseCommand adds the position of a command in its batch to err.
func inLeaseCommand(err error, i, n int) error {
	return fmt.Errorf("%w (lease command %d of %d in the batch)", err, i, n)
}

// AppendLeaseBatch appends a CmdLeaseBatch entry carrying cs, in order, to
// b. Every command must pass LeaseCommand.Validate and the batch must hold
// 1 to MaxBatchLeaseCommands commands. Arrival times are made
// non-decreasing as AppendReserveBatch does. On error b is returned
// unchanged and the error (wrapping ErrInvalidCommand) names the offending
// command.
func AppendLeaseBatch(b []byte, st Stamp, cs []LeaseCommand) ([]byte, error) {
	if err := validateLeaseBatchLen(uint64(len(cs))); err != nil {
		return b, err
	}
	for i := range cs {
		if err := cs[i].Validate(); err != nil {
			return b, inLeaseCommand(err, i, len(cs))
		}
	}
	b = appendHeader(b, CmdLeaseBatch, st)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	prev := st.Nanos
	for i := range cs {
		c := &cs[i]
		b = append(b, byte(c.Kind))
		arrived := max(prev, c.ArrivedNanos)
		b = binary.AppendUvarint(b, uint64(arrived-prev)) // >= 0; wraps only for stamps 2^63 apart, which decoding rejects
		prev = arrived
		switch c.Kind {
		case CmdLease:
			b = appendLeasePayload(b, c.Lease)
		case CmdRenew:
			b = appendRenewPayload(b, c.Renew)
		default:
			b = appendReturnPayload(b, c.Return)
		}
	}
	return b, nil
}

// decodeLeaseBatch reads a CmdLeaseBatch's commands into cs (reusing its
// storage).
func decodeLeaseBatch(r *reader, cs []LeaseCommand, names *interner, stampNanos int64) ([]LeaseCommand, error) {
	n := r.uvarint("lease batch count")
	if r.err != nil {
		return cs, r.err
	}
	if err := validateLeaseBatchLen(n); err != nil {
		return cs, err
	}
	count := int(n)
	if want := min(count, r.remaining()/minLeaseCommandLen); cap(cs) < want {
		cs = make([]LeaseCommand, 0, want)
	}
	cs = cs[:0]
	arrived := stampNanos
	for i := range count {
		kind := CommandType(r.byte1("lease command kind"))
		delta := r.uvarint("arrival delta")
		if r.err != nil {
			return cs, r.err
		}
		if delta > uint64(math.MaxInt64-arrived) {
			return cs, inLeaseCommand(fmt.Errorf("%w: arrival %d+%dns exceeds the int64 range", ErrInvalidCommand, arrived, delta), i, count)
		}
		arrived += int64(delta)
		c := LeaseCommand{Kind: kind, ArrivedNanos: arrived}
		var err error
		switch kind {
		case CmdLease:
			err = decodeLease(r, &c.Lease, names)
		case CmdRenew:
			err = decodeRenew(r, &c.Renew, names)
		case CmdReturn:
			err = decodeReturn(r, &c.Return, names)
		default:
			err = c.Validate()
		}
		if err != nil {
			return cs, inLeaseCommand(err, i, count)
		}
		cs = append(cs, c)
	}
	return cs, nil
}
