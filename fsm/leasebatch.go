package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// leasebatch.go: CmdLeaseBatch, several lease commands in one log entry.
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
//	               kind's payload as in leasecodec.go

// MaxBatchLeaseCommands is the most commands one CmdLeaseBatch may carry.
const MaxBatchLeaseCommands = 4096

// minLeaseCommandLen is the smallest encoding of one batched command
// (kind, delta, and a return's shortest payload); it bounds preallocation
// for a claimed count.
const minLeaseCommandLen = 9

// LeaseCommand is one command of a CmdLeaseBatch: Kind (CmdLease, CmdRenew
// or CmdReturn) says which of Lease, Renew and Return it carries.
// ArrivedNanos is the cluster time at which it reached the leader, as for
// a reserve: non-decreasing within a batch (an earlier one counts as the
// previous command's, the first as at least the entry's stamp).
type LeaseCommand struct {
	Kind         CommandType
	Lease        Lease
	Renew        Renew
	Return       Return
	ArrivedNanos int64
}

// Validate checks the command's kind and payload, as the single-command
// Append functions do.
func (c *LeaseCommand) Validate() error {
	switch c.Kind {
	case CmdLease:
		return c.Lease.Validate()
	case CmdRenew:
		return c.Renew.Validate()
	case CmdReturn:
		return c.Return.Validate()
	}
	return fmt.Errorf("%w: lease command kind %d (allowed: %d lease, %d renew, %d return)", ErrInvalidCommand, c.Kind, CmdLease, CmdRenew, CmdReturn)
}

// Limit is the name of the limit the command is on.
func (c *LeaseCommand) Limit() string {
	switch c.Kind {
	case CmdLease:
		return c.Lease.Limit
	case CmdRenew:
		return c.Renew.Limit
	}
	return c.Return.Limit
}

// inLeaseCommand adds the position of a command in its batch to err.
func inLeaseCommand(err error, i, n int) error {
	return fmt.Errorf("%w (lease command %d of %d in the batch)", err, i, n)
}

func validateLeaseBatchLen(n uint64) error {
	if n < 1 || n > MaxBatchLeaseCommands {
		return fmt.Errorf("%w: batch of %d lease commands (allowed: 1-%d)", ErrInvalidCommand, n, MaxBatchLeaseCommands)
	}
	return nil
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

// applyLeaseBatch decides each command of a CmdLeaseBatch at its own
// arrival (if the entry's stamp is trusted; otherwise at the timeline's
// time, as every command of an untrusted entry), expiring what is due
// before each exactly as if it had been applied alone.
func (s *state) applyLeaseBatch(trusted bool, cs []LeaseCommand) []LeaseResult {
	results := make([]LeaseResult, len(cs))
	for i := range cs {
		c := &cs[i]
		if trusted && c.ArrivedNanos > s.lastNowNanos {
			s.advanceTo(c.ArrivedNanos)
		}
		now := s.lastNowNanos
		switch c.Kind {
		case CmdLease:
			results[i] = s.lease(now, &c.Lease)
		case CmdRenew:
			results[i] = s.renew(now, &c.Renew)
		case CmdReturn:
			results[i] = s.returnLease(now, &c.Return)
		}
	}
	return results
}

// advanceTo moves the cluster time to nowNanos (> lastNowNanos) and
// expires what is due then: request IDs, sessions and leases.
func (s *state) advanceTo(nowNanos int64) {
	s.advanceWaiters(nowNanos)
	s.lastNowNanos = nowNanos
	s.dedup.expire(nowNanos)
	s.leaseDedup.expire(nowNanos)
	s.sessions.expire(nowNanos)
	s.expireLeases(nowNanos)
	s.reservations.expire(nowNanos)
}
