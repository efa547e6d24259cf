package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// leaseparse.go: the request bodies of the lease endpoints, the help text
// of their fields, and how they are read and checked into fsm commands.
// A rejected field is answered 400 with its name and what it allows; the
// register's own Validate runs after these checks.

// leasePolicyRequest is the body of PUT /v1/limits/{name}/lease-policy.
type leasePolicyRequest struct {
	Leased                api.Opt[bool]  `json:"leased"`
	BurstPermits          api.Opt[int64] `json:"burst_permits"`
	MaxOutstandingPermits api.Opt[int64] `json:"max_outstanding_permits"`
}

var leasePolicyFields = api.Fields{
	{"leased", "true to lease the limit's permits to workers, false to reserve them one request at a time again (required)"},
	{"burst_permits", "C, the most permits the free pool accumulates: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
	{"max_outstanding_permits", "O, the most permits held by leases at once: an integer 1-" + maxPoolText + ", or 0 for the default (one second of permits); only with leased true"},
}

const maxPoolText = "1152921504606846976 (2^60)"

// leaseRequest is the body of POST /v1/limits/{name}/lease.
type leaseRequest struct {
	Holder api.Opt[string] `json:"holder"`
	Group  api.Opt[string] `json:"group"`
	Weight api.Opt[int64]  `json:"weight"`
	demandFields
	TTL       api.Opt[string] `json:"ttl"`
	RequestID api.Opt[string] `json:"request_id"`
}

const (
	helpDemandMilli = "the rate the holder wants in thousandths of a permit per second, an integer 0 to 1000000000000 " +
		"(required, or the older demand_per_sec)"
	helpDemand = "deprecated, use demand_milli_per_sec: a JSON number of permits per second, 0 to 1e9, converted exactly " +
		"from its decimal text to thousandths, any remainder rounded up (0.0004 -> 1, 2.0001 -> 2001)"
	helpTTL       = `a Go duration string from 100ms to 1m0s such as "2s" (required): how long the grant lasts`
	helpRequestID = "an idempotency key of " + api.AllowedRequestIDChars
	helpReport    = "an integer >= 0 (default 0)"
)

var leaseFields = api.Fields{
	{"holder", "the worker's name, " + api.AllowedNameChars + " (required)"},
	{"group", "the worker's group, " + api.AllowedNameChars + " (required)"},
	{"weight", "the group's weight in the fair division of the rate, an integer 1-1000000 (default 1)"},
	{"demand_milli_per_sec", helpDemandMilli},
	{"demand_per_sec", helpDemand},
	{"ttl", helpTTL},
	{"request_id", helpRequestID},
}

// renewRequest is the body of POST /v1/limits/{name}/leases/{id}/renew.
type renewRequest struct {
	Epoch     api.Opt[uint64] `json:"epoch"`
	Spent     api.Opt[int64]  `json:"spent"`
	StolenOut api.Opt[int64]  `json:"stolen_out"`
	StolenIn  api.Opt[int64]  `json:"stolen_in"`
	Kept      api.Opt[int64]  `json:"kept"`
	demandFields
	TTL       api.Opt[string] `json:"ttl"`
	RequestID api.Opt[string] `json:"request_id"`
}

var reportFields = api.Fields{
	{"epoch", "the epoch of the grant reported on, an integer >= 1 (required)"},
	{"spent", "permits of the grant the holder spent: " + helpReport},
	{"stolen_out", "permits of the grant the holder gave to other holders: " + helpReport},
	{"stolen_in", "permits the holder received from other leases since its last report: " + helpReport},
	{"kept", "unspent permits of the grant the holder keeps spending while the renewal is in flight (the in-flight allowance; they become the first permits of the new grant): " + helpReport + "; spent + stolen_out + kept at most the grant; renew only"},
	{"demand_milli_per_sec", helpDemandMilli + "; renew only"},
	{"demand_per_sec", helpDemand + "; renew only"},
	{"ttl", helpTTL + "; renew only"},
	{"request_id", helpRequestID},
}

// returnRequest is the body of POST /v1/limits/{name}/leases/{id}/return.
type returnRequest struct {
	Epoch     api.Opt[uint64] `json:"epoch"`
	Spent     api.Opt[int64]  `json:"spent"`
	StolenOut api.Opt[int64]  `json:"stolen_out"`
	StolenIn  api.Opt[int64]  `json:"stolen_in"`
	RequestID api.Opt[string] `json:"request_id"`
}

var returnFields = api.Fields{
	{"epoch", reportFields.Help("epoch")},
	{"spent", reportFields.Help("spent")},
	{"stolen_out", reportFields.Help("stolen_out")},
	{"stolen_in", reportFields.Help("stolen_in")},
	{"request_id", helpRequestID},
}

// demandFields are a demand's two spellings: demand_milli_per_sec, an
// integer of thousandths of a permit per second (the one vocabulary of
// demands and shares, from the worker to the register and back), and the
// older demand_per_sec, a number of permits per second, still accepted
// for one release. Exactly one is required.
type demandFields struct {
	Milli  api.Opt[int64] `json:"demand_milli_per_sec"`
	PerSec jsonDecimal    `json:"demand_per_sec"`
}

// parseDemand validates a demand given in either spelling.
func parseDemand(d demandFields, fields api.Fields) (int64, *api.Error) {
	switch {
	case d.Milli.Set && d.PerSec.Set:
		return 0, api.BadRequest(`fields "demand_milli_per_sec" and "demand_per_sec" both given; allowed: one of them (demand_milli_per_sec: %s)`, fields.Help("demand_milli_per_sec"))
	case d.Milli.Set:
		if d.Milli.V < 0 || d.Milli.V > fsm.MaxDemandMilliPermitsPerSec {
			return 0, api.BadRequest(`field "demand_milli_per_sec": %d; allowed: %s`, d.Milli.V, fields.Help("demand_milli_per_sec"))
		}
		return d.Milli.V, nil
	case d.PerSec.Set:
		milli, ok := decimalMilli(d.PerSec.lit)
		if !ok {
			return 0, api.BadRequest(`field "demand_per_sec": %s; allowed: %s`, api.Quote(d.PerSec.lit), fields.Help("demand_per_sec"))
		}
		return milli, nil
	}
	return 0, api.BadRequest(`field "demand_milli_per_sec" is required; allowed: %s`, fields.Help("demand_milli_per_sec"))
}

// parseTTL validates a ttl field.
func parseTTL(v api.Opt[string]) (int64, *api.Error) {
	if !v.Set {
		return 0, api.BadRequest(`field "ttl" is required; allowed: %s`, helpTTL)
	}
	d, herr := api.ParseDuration("ttl", v.V, false)
	if herr != nil {
		return 0, herr
	}
	if int64(d) < fsm.MinLeaseTTLNanos || int64(d) > fsm.MaxLeaseTTLNanos {
		return 0, api.BadRequest(`field "ttl": %s; allowed: %s`, api.Quote(v.V), helpTTL)
	}
	return int64(d), nil
}

// parseCount validates a non-negative permit count (0 when absent).
func parseCount(field string, v api.Opt[int64], fields api.Fields) (int64, *api.Error) {
	if v.Set && v.V < 0 {
		return 0, api.BadRequest(`field %q: %d; allowed: %s`, field, v.V, fields.Help(field))
	}
	return v.V, nil
}

// parseRequestIDField validates an optional request_id field.
func parseRequestIDField(v api.Opt[string]) (string, *api.Error) {
	if !v.Set {
		return "", nil
	}
	if err := api.ValidateRequestID(v.V); err != nil {
		return "", api.BadRequest(`field "request_id": %v`, err)
	}
	return v.V, nil
}

// parseLeaseID validates the {id} of a lease path: a decimal integer
// 1..2^64-1 without sign or leading zeros.
func parseLeaseID(s string) (uint64, *api.Error) {
	const allowed = "a lease id: a decimal integer from 1 to 18446744073709551615 without sign or leading zeros"
	if s == "" || len(s) > 20 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, api.BadRequest("lease id %s in the path; allowed: %s", api.Quote(s), allowed)
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, api.BadRequest("lease id %s in the path; allowed: %s", api.Quote(s), allowed)
	}
	return id, nil
}

// parseReport validates the fields common to renew and return.
func parseReport(epoch api.Opt[uint64], spent, out, in api.Opt[int64], fields api.Fields) (e uint64, s, o, i int64, herr *api.Error) {
	if !epoch.Set || epoch.V < 1 {
		if !epoch.Set {
			return 0, 0, 0, 0, api.BadRequest(`field "epoch" is required; allowed: %s`, fields.Help("epoch"))
		}
		return 0, 0, 0, 0, api.BadRequest(`field "epoch": %d; allowed: %s`, epoch.V, fields.Help("epoch"))
	}
	if s, herr = parseCount("spent", spent, fields); herr != nil {
		return
	}
	if o, herr = parseCount("stolen_out", out, fields); herr != nil {
		return
	}
	if i, herr = parseCount("stolen_in", in, fields); herr != nil {
		return
	}
	return epoch.V, s, o, i, nil
}

// readObject reads r's body and decodes it as one JSON object into v.
func readObject(w http.ResponseWriter, r *http.Request, v any, fields api.Fields) *api.Error {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		return herr
	}
	return api.DecodeObject(buf.Bytes(), v, fields, false)
}

// parseLeaseRequest validates a lease body into q (whose Limit is set).
func parseLeaseRequest(req *leaseRequest, q *fsm.Lease) *api.Error {
	for _, f := range []struct {
		name string
		V    api.Opt[string]
		dst  *string
	}{{"holder", req.Holder, &q.Holder}, {"group", req.Group, &q.Group}} {
		if !f.V.Set {
			return api.BadRequest("field %q is required; allowed: %s", f.name, leaseFields.Help(f.name))
		}
		if err := api.ValidateName(f.name+" name", f.V.V); err != nil {
			return api.BadRequest("field %q: %v", f.name, err)
		}
		*f.dst = f.V.V
	}
	q.Weight = 1
	if req.Weight.Set {
		if req.Weight.V < 1 || req.Weight.V > fsm.MaxLeaseWeight {
			return api.BadRequest(`field "weight": %d; allowed: %s`, req.Weight.V, leaseFields.Help("weight"))
		}
		q.Weight = req.Weight.V
	}
	var herr *api.Error
	if q.DemandMilliPermitsPerSec, herr = parseDemand(req.demandFields, leaseFields); herr != nil {
		return herr
	}
	if q.TTLNanos, herr = parseTTL(req.TTL); herr != nil {
		return herr
	}
	if q.RequestID, herr = parseRequestIDField(req.RequestID); herr != nil {
		return herr
	}
	return nil
}
