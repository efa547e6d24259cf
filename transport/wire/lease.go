package wire

// lease.go: a worker's lease commands over the binary protocol (a
// thousand workers renewing every second cost a leader less than over
// HTTP). Like the reserve's, these are the protocol's own types: a node
// converts them to the register's and validates them there (the numbering
// of LeaseStatus is the register's, checked by a test in package node).

// LeaseOpen asks for a lease on Limit for Holder in Group (OpLease).
type LeaseOpen struct {
	Limit, Holder, Group string
	// Weight is the group's weight (0: the server's default, 1).
	Weight      int64
	DemandMilli int64 // thousandths of a permit per second
	TTLNanos    int64
	RequestID   string
}

// LeaseReport is what a holder reports on its grant at Epoch of lease
// LeaseID (OpRenew, OpReturn).
type LeaseReport struct {
	Limit                      string
	LeaseID, Epoch             uint64
	Spent, StolenOut, StolenIn int64
	RequestID                  string
}

// LeaseRenew reports on a grant and asks for the next one (OpRenew).
type LeaseRenew struct {
	LeaseReport
	// Kept is the in-flight allowance: unspent permits of the grant the
	// holder keeps spending while the renewal is in flight.
	Kept        int64
	DemandMilli int64
	TTLNanos    int64
}

// LeaseStatus is the register's outcome of a lease command.
type LeaseStatus uint8

// Lease outcomes (the register's numbering).
const (
	// LeaseGranted (lease, renew): Permits may be spent until ExpiresIn.
	LeaseGranted LeaseStatus = 1
	// LeaseRefused (lease): no lease was opened; retry after RetryAfter.
	LeaseRefused LeaseStatus = 2
	// LeaseUnknownLimit: no limit of that name exists.
	LeaseUnknownLimit LeaseStatus = 3
	// LeaseInvalid: the command cannot be applied; Detail says why.
	LeaseInvalid LeaseStatus = 4
	// LeaseFenced (renew, return): the lease is not live at that epoch.
	LeaseFenced LeaseStatus = 5
	// LeaseReturned (return): the lease is closed.
	LeaseReturned LeaseStatus = 6
)

// LeaseResult is the answer to a lease command. ExpiresInNanos counts from
// when the holder sent the request; RetryAfterNanos from the answer.
type LeaseResult struct {
	Status                      LeaseStatus
	LeaseID, Epoch              uint64
	Permits                     int64
	ExpiresInNanos              int64
	ShareMilli, CreditedPermits int64
	RetryAfterNanos             int64
	Duplicate                   bool
	Detail                      string
}

// EncodeLeaseOpen is the payload of an OpLease call.
func EncodeLeaseOpen(q LeaseOpen) []byte {
	var w Enc
	w.Str(q.Limit)
	w.Str(q.Holder)
	w.Str(q.Group)
	w.Svar(q.Weight)
	w.Svar(q.DemandMilli)
	w.Svar(q.TTLNanos)
	w.Str(q.RequestID)
	return w.B
}

// DecodeLeaseOpen decodes an OpLease payload (the encoding only; the node
// validates the values).
func DecodeLeaseOpen(p []byte) (LeaseOpen, error) {
	r := Dec{B: p}
	v := LeaseOpen{Limit: r.Str(), Holder: r.Str(), Group: r.Str(), Weight: r.Svar(), DemandMilli: r.Svar(), TTLNanos: r.Svar(), RequestID: r.Str()}
	return v, r.Done()
}

func (w *Enc) report(q LeaseReport) {
	w.Str(q.Limit)
	w.Uvar(q.LeaseID)
	w.Uvar(q.Epoch)
	w.Svar(q.Spent)
	w.Svar(q.StolenOut)
	w.Svar(q.StolenIn)
	w.Str(q.RequestID)
}

func (r *Dec) report() LeaseReport {
	return LeaseReport{Limit: r.Str(), LeaseID: r.Uvar(), Epoch: r.Uvar(), Spent: r.Svar(), StolenOut: r.Svar(), StolenIn: r.Svar(), RequestID: r.Str()}
}

// EncodeLeaseRenew is the payload of an OpRenew call.
func EncodeLeaseRenew(q LeaseRenew) []byte {
	var w Enc
	w.report(q.LeaseReport)
	w.Svar(q.Kept)
	w.Svar(q.DemandMilli)
	w.Svar(q.TTLNanos)
	return w.B
}

// DecodeLeaseRenew decodes an OpRenew payload.
func DecodeLeaseRenew(p []byte) (LeaseRenew, error) {
	r := Dec{B: p}
	v := LeaseRenew{LeaseReport: r.report()}
	v.Kept, v.DemandMilli, v.TTLNanos = r.Svar(), r.Svar(), r.Svar()
	return v, r.Done()
}

// EncodeLeaseReturn is the payload of an OpReturn call.
func EncodeLeaseReturn(q LeaseReport) []byte {
	var w Enc
	w.report(q)
	return w.B
}

// DecodeLeaseReturn decodes an OpReturn payload.
func DecodeLeaseReturn(p []byte) (LeaseReport, error) {
	r := Dec{B: p}
	v := r.report()
	return v, r.Done()
}

// EncodeLeaseResult is the payload of a CodeOK answer to a lease command.
func EncodeLeaseResult(res LeaseResult) []byte {
	var w Enc
	w.U8(byte(res.Status))
	w.Uvar(res.LeaseID)
	w.Uvar(res.Epoch)
	w.Svar(res.Permits)
	w.Svar(res.ExpiresInNanos)
	w.Svar(res.ShareMilli)
	w.Svar(res.CreditedPermits)
	w.Svar(res.RetryAfterNanos)
	w.Bool(res.Duplicate)
	w.Str(res.Detail)
	return w.B
}

// DecodeLeaseResult decodes a CodeOK answer to a lease command.
func DecodeLeaseResult(p []byte) (LeaseResult, error) {
	r := Dec{B: p}
	v := LeaseResult{Status: LeaseStatus(r.U8()), LeaseID: r.Uvar(), Epoch: r.Uvar(), Permits: r.Svar(), ExpiresInNanos: r.Svar(),
		ShareMilli: r.Svar(), CreditedPermits: r.Svar(), RetryAfterNanos: r.Svar(), Duplicate: r.Bool(), Detail: r.Str()}
	return v, r.Done()
}
