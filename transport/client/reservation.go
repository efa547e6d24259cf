package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/permitd/permitd/transport/api"
)

// reservation.go: reserves of several limits at once, all or nothing
// (POST /v1/reserve), and settling and releasing the reservations they
// leave (POST /v1/reservations/{id}/settle, /release).

// Want is one limit of a multi-limit reserve, or one limit's actual use in
// a settlement.
type Want struct {
	Limit   string `json:"name"`
	Permits int64  `json:"permits"`
}

// Reservation is the answer to ReserveMany: a Grant (Permits is the sum
// over the limits) plus the reservation's ID, and, when refused, the
// limit that blocked.
type Reservation struct {
	Grant
	// ID names the reservation (granted only), for Settle and Release.
	ID string
	// Blocking (refused) is the limit that could serve its part last.
	Blocking string
	// Holds (granted) reports in-flight permits (a concurrency limit):
	// only then does Release free anything.
	Holds bool
	// HoldExpiresIn (granted, Holds) is how long after the answer left
	// the server the reservation's in-flight hold lapses in the register
	// (the earliest, over several concurrency limits), unless released
	// earlier: until then the caller may keep its slot. It differs from
	// ExpiresIn, the earliest expiry of every part (a strict limit's
	// permit expires sooner), and may be shorter than the limit's TTL
	// (a reserve that waited in the cap's queue holds its slot from the
	// instant it came free). Negative: lapsed already (a late replay). 0
	// when the reservation holds nothing. HoldExpiresAt gives the moment
	// on the client's clock.
	HoldExpiresIn time.Duration
	// Limits are what was asked.
	Limits []Want
}

// HoldExpiresAt is the conservative end of the reservation's in-flight
// hold on the client's clock: SentAt + Held + HoldExpiresIn, never later
// than the moment the register frees the slot (the register counts it
// from the answer's departure, at least Held after SentAt, on a timeline
// that runs no faster than real time), up to the client clock's rate
// error. SentAt for a hold that had lapsed (HoldExpiresIn < 0), the zero
// time when the reservation holds nothing. A call that uses the slot
// should end before it.
func (r Reservation) HoldExpiresAt() time.Time {
	switch {
	case !r.Granted || !r.Holds || r.HoldExpiresIn == 0:
		return time.Time{}
	case r.HoldExpiresIn < 0:
		return r.SentAt
	}
	return r.SentAt.Add(r.Held).Add(r.HoldExpiresIn)
}

// ReserveOptions tune ReserveMany.
type ReserveOptions struct {
	// MaxWait is the longest the permits may be granted ahead of now.
	MaxWait time.Duration
	// SettleWithin is how long after the grant the reservation can be
	// settled (0: the server's default, one minute; at most ten minutes).
	SettleWithin time.Duration
}

// ReserveMany reserves permits of several limits (1 to 8, each once) in
// one decision: every limit grants its part at one time, or none does. A
// refusal (429) is not an error: the Reservation has Granted false,
// RetryAfter and Blocking. The reserve carries a request ID, kept across
// failovers, so that a retry is decided once. Use the grant at ReadyAt
// (Grant.Wait), then Settle the real cost or Release in-flight permits.
//
// A reserve that names an in-flight cap whose permits are all held waits
// in the cap's queue, up to o.MaxWait, for a release or a lapse that frees
// them: the server answers it once it is granted (or refused at its
// deadline), so each attempt is allowed the attempt timeout plus
// o.MaxWait, and a retry at another server (the same request ID) keeps
// its place in the queue.
func (c *Client) ReserveMany(ctx context.Context, wants []Want, o ReserveOptions) (Reservation, error) {
	if len(wants) == 0 || len(wants) > 8 {
		return Reservation{}, fmt.Errorf("%w: reserve %d limits; allowed: 1 to 8", ErrInvalid, len(wants))
	}
	var total int64
	for _, w := range wants {
		if w.Permits < 1 {
			return Reservation{}, fmt.Errorf("%w: reserve %d permits of %q; allowed: >= 1", ErrInvalid, w.Permits, w.Limit)
		}
		total += w.Permits
	}
	if o.MaxWait < 0 || o.SettleWithin < 0 {
		return Reservation{}, fmt.Errorf("%w: max wait %v, settle within %v; allowed: >= 0", ErrInvalid, o.MaxWait, o.SettleWithin)
	}
	id := newRequestID()
	in := struct {
		Limits       []Want `json:"limits"`
		MaxWait      string `json:"max_wait"`
		RequestID    string `json:"request_id"`
		SettleWithin string `json:"settle_within,omitempty"`
	}{Limits: wants, MaxWait: o.MaxWait.String(), RequestID: id}
	if o.SettleWithin > 0 {
		in.SettleWithin = o.SettleWithin.String()
	}
	body, err := jsonMarshal(in)
	if err != nil {
		return Reservation{}, fmt.Errorf("%w: encoding the request: %v", ErrInvalid, err)
	}
	// The server may hold the answer while the reserve waits in an
	// in-flight cap's queue, up to its max wait.
	resp, err := c.sendDecided(ctx, http.MethodPost, "/v1/reserve", body, nil, o.MaxWait)
	if err != nil {
		return Reservation{}, err
	}
	if resp.code != http.StatusOK && resp.code != http.StatusTooManyRequests {
		return Reservation{}, resp.apiError()
	}
	var a api.ReserveAnswer
	if err := jsonUnmarshal(resp.body, &a); err != nil {
		return Reservation{}, fmt.Errorf("client: cannot decode the reserve answer of %s: %w", resp.server, err)
	}
	r := Reservation{Grant: Grant{
		Granted:    resp.code == http.StatusOK && a.Granted,
		Permits:    total,
		Duplicate:  a.Duplicate,
		RequestID:  id,
		SentAt:     resp.sentAt,
		ReceivedAt: resp.receivedAt,
		clock:      c.clock,
	}, Limits: wants}
	if r.Granted {
		r.Delay = time.Duration(a.WaitNanos)
		r.ExpiresIn = time.Duration(a.ExpiresInNanos)
		r.Spacing = time.Duration(a.SpacingNanos)
		r.ID = a.ReservationID
		r.Holds = a.Holds
		r.HoldExpiresIn = time.Duration(a.HoldExpiresInNanos)
		if r.Holds && a.HoldExpiresInNanos == 0 {
			// A server that predates hold_expires_in_ns: the expiry is
			// never later than the hold's end.
			r.HoldExpiresIn = r.ExpiresIn
		}
		// The server held the request that long (in a cap's queue): the
		// expiry and the hold's end count from the answer's departure, at
		// least that long after SentAt. A server's claim beyond the round
		// trip is capped.
		r.Held = min(max(time.Duration(a.HeldNanos), 0), resp.receivedAt.Sub(resp.sentAt))
	} else {
		r.RetryAfter, r.Refusal = time.Duration(a.RetryAfterNanos), a.Error
		r.Blocking, r.KeysFull = a.Blocking, a.KeysFull
	}
	return r, nil
}

// Settled is what a settlement did to one limit of a reservation
// (api.SettledLimit).
type Settled = api.SettledLimit

// SettleResult is the answer to Settle (api.SettleAnswer).
type SettleResult = api.SettleAnswer

// Settle reports the permits actually used per limit of reservation id (a
// limit not listed used what it reserved). Unused permits go back to the
// limits that can take them, an overrun is charged as debt. The settlement
// carries a request ID kept across failovers, so it is applied once. An
// unknown or final reservation is ErrNotFound, another client's
// ErrForbidden, one already settled ErrConflict (all as *APIError).
func (c *Client) Settle(ctx context.Context, id string, actual []Want) (SettleResult, error) {
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return SettleResult{}, fmt.Errorf("%w: reservation id %q; allowed: the ID a grant returned", ErrInvalid, id)
	}
	if actual == nil {
		actual = []Want{}
	}
	in := struct {
		Actual    []Want `json:"actual"`
		RequestID string `json:"request_id"`
	}{actual, newRequestID()}
	var out SettleResult
	err := c.call(ctx, http.MethodPost, "/v1/reservations/"+id+"/settle", in, &out)
	return out, err
}

// ReleaseResult is the answer to Release (api.ReleaseAnswer).
type ReleaseResult = api.ReleaseAnswer

// Release frees the in-flight permits reservation id holds (its
// concurrency limits; rate limits are untouched). Released is 0 for a
// second release (Duplicate) and for a hold that already expired.
func (c *Client) Release(ctx context.Context, id string) (ReleaseResult, error) {
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return ReleaseResult{}, fmt.Errorf("%w: reservation id %q; allowed: the ID a grant returned", ErrInvalid, id)
	}
	var out ReleaseResult
	err := c.call(ctx, http.MethodPost, "/v1/reservations/"+id+"/release", struct{}{}, &out)
	return out, err
}
