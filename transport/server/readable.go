package server

import (
	"net/http"
	"strings"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
)

// readable.go: GET /v1/readable-limits, what the status page lists.

// listReadableLimits answers GET /v1/readable-limits: the explicit limits
// the request's token may read (GET /v1/limits/{name}), sorted by name,
// and one family per template whose every key it may read, with its live
// keys counted and their counters summed: never one entry per key, so the
// answer stays small with a million keys. Behind RequireTokens the token
// is passed on (the route needs any token); a client token restricted
// with limits= sees only the limits it matches, and a family if a pattern
// covers all its keys ("cust:*", "cu*", "*").
//
// A store that reads its replica's limits and templates (a
// LimitStatsSource: the node) answers from this agent's replica, which may
// lag the leader by the time it takes to apply; another answers every
// limit through the leader, as GET /v1/limits.
func (h *handler) listReadableLimits(w http.ResponseWriter, r *http.Request) {
	t, tokens := auth.TokenFrom(r.Context())
	var keep func(string) bool
	if tokens {
		keep = func(name string) bool {
			ok, _ := auth.Allows(t, auth.NeedRead, name)
			return ok
		}
	}
	src, ok := h.store.(LimitStatsSource)
	if !ok {
		h.writeLimits(w, r, keep)
		return
	}
	stats, _ := src.LimitStats(-1)
	fams := src.TemplateStats()
	out := api.ReadableLimits{Limits: make([]api.Limit, 0, len(stats))}
	for i := range stats {
		if keep == nil || keep(stats[i].Info.Name) {
			out.Limits = append(out.Limits, newLimitInfoView(stats[i].Info))
		}
	}
	for i := range fams {
		if !tokens || familyReadable(t, fams[i].Prefix) {
			out.Families = append(out.Families, newFamilyView(&fams[i]))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// familyReadable reports whether token t may read every key of the
// template of prefix: any token that may read every limit, or a client
// token one of whose patterns is a literal prefix of "prefix:" followed
// by '*' (limit names hold no '/', which '*' would not match).
func familyReadable(t auth.Token, prefix string) bool {
	if ok, _ := auth.Allows(t, auth.NeedRead, ""); ok {
		return true
	}
	for _, p := range t.Limits {
		lit, star := strings.CutSuffix(p, "*")
		if star && !strings.ContainsAny(lit, `*?[\`) && strings.HasPrefix(prefix+":", lit) {
			return true
		}
	}
	return false
}

// newFamilyView is the family of template t as the API shows it.
func newFamilyView(t *fsm.TemplateStats) api.LimitFamily {
	v := newLimitView(t.Prefix, t.Config, 0, false)
	return api.LimitFamily{
		Template: t.Prefix, LimitSpec: v.LimitSpec, IntervalNanos: v.IntervalNanos,
		Active: t.Active, Keys: t.LiveKeys, MaxKeys: t.MaxKeys, IdleNanos: t.IdleNanos,
		GrantedRequests: t.GrantedRequests, GrantedPermits: t.GrantedPermits, RefusedRequests: t.RefusedRequests,
	}
}
