package server

import (
	"bytes"
	"net"
	"net/http"
	"strconv"

	"github.com/permitd/permitd/transport/api"
)

// joinRequest is the body of POST /v1/cluster/join.
type joinRequest struct {
	ID       api.Opt[string] `json:"id"`
	RaftAddr api.Opt[string] `json:"raft_addr"`
}

var joinFields = api.Fields{
	{"id", "the new server's id: " + api.AllowedNameChars},
	{"raft_addr", `the new server's raft address "host:port" (port 1-65535)`},
}

// validateHostPort checks a "host:port" address with a non-empty host and a
// numeric port in 1–65535.
func validateHostPort(field, addr string) *api.Error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && host == "" {
		err = errEmptyHost
	}
	if err == nil {
		var p uint64
		p, err = strconv.ParseUint(port, 10, 16)
		if err == nil && p == 0 {
			err = errZeroPort
		}
	}
	if err != nil || len(addr) > 255 {
		return api.BadRequest("field %q: %s is not a valid address; allowed: %s", field, api.Quote(addr), joinFields.Help(field))
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const (
	errEmptyHost constError = "empty host"
	errZeroPort  constError = "port 0"
)

func (h *handler) join(w http.ResponseWriter, r *http.Request) {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	var req joinRequest
	if herr := api.DecodeObject(buf.Bytes(), &req, joinFields, false); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if !req.ID.Set || !req.RaftAddr.Set {
		api.WriteError(w, http.StatusBadRequest, `fields "id" and "raft_addr" are required; allowed: `+
			joinFields.Help("id")+`; `+joinFields.Help("raft_addr"))
		return
	}
	if err := api.ValidateName("server id", req.ID.V); err != nil {
		api.WriteError(w, http.StatusBadRequest, `field "id": `+err.Error())
		return
	}
	if herr := validateHostPort("raft_addr", req.RaftAddr.V); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	voter, err := h.store.Join(ctx, req.ID.V, req.RaftAddr.V)
	if err != nil {
		h.storeError(w, "join", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.JoinAnswer{ID: req.ID.V, RaftAddr: req.RaftAddr.V, Joined: true, Voter: voter})
}

func (h *handler) removeServer(w http.ResponseWriter, r *http.Request, id string) {
	if err := api.ValidateName("server id", id); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if herr := h.emptyBody(w, r); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	if err := h.store.Remove(ctx, id); err != nil {
		h.storeError(w, "remove server", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Removed bool   `json:"removed"`
	}{id, true})
}

// transferRequest is the body of POST /v1/cluster/transfer-leadership.
type transferRequest struct {
	To api.Opt[string] `json:"to"`
}

var transferFields = api.Fields{
	{"to", "the id of the voter to hand leadership to (" + api.AllowedNameChars + "); absent or empty: any voter"},
}

// transferLeadership serves POST /v1/cluster/transfer-leadership: the
// leader hands its leadership to another voter (a rolling restart moves
// it before stopping the leader; jepsen-lite moves it A→B→A).
func (h *handler) transferLeadership(w http.ResponseWriter, r *http.Request) {
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	if herr := api.ReadBody(w, r, buf); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	var req transferRequest
	if herr := api.DecodeObject(buf.Bytes(), &req, transferFields, true); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if req.To.V != "" {
		if err := api.ValidateName("server id", req.To.V); err != nil {
			api.WriteError(w, http.StatusBadRequest, `field "to": `+err.Error())
			return
		}
	}
	ctx, cancel := h.context(r)
	defer cancel()
	if err := h.store.TransferLeadership(ctx, req.To.V); err != nil {
		h.storeError(w, "transfer leadership", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, struct {
		To          string `json:"to"`
		Transferred bool   `json:"transferred"`
	}{req.To.V, true})
}

// snapshot serves GET /v1/snapshot: the leader's consistent snapshot of
// the register (application/octet-stream, its applied index in the
// X-Permitd-Applied-Index header), for `permitd snapshot save`. A node
// that is not the leader answers 503: ask the leader.
func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	ctx, cancel := h.context(r)
	defer cancel()
	index, err := h.store.SaveSnapshot(ctx, &buf)
	if err != nil {
		h.storeError(w, "snapshot", err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("X-Permitd-Applied-Index", strconv.FormatUint(index, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = buf.WriteTo(w)
}

func (h *handler) cluster(w http.ResponseWriter, _ *http.Request) {
	st := h.store.Status()
	servers := st.Servers
	if servers == nil {
		servers = []api.Server{}
	}
	api.WriteJSON(w, http.StatusOK, api.Cluster{ID: st.ID, LeaderID: st.LeaderID, Term: st.Term, Servers: servers})
}

// ready answers /readyz: 200 only when the node knows a leader and has
// applied its log (Status.Ready).
func (h *handler) ready(w http.ResponseWriter) {
	st := h.store.Status()
	if !st.Ready {
		reason := "log not yet applied"
		switch {
		case st.State == "removed":
			reason = "this node was removed from the cluster"
		case st.LeaderID == "":
			reason = "no leader known"
		}
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, http.StatusServiceUnavailable, "not ready: "+reason+" (state "+st.State+", applied index "+
			strconv.FormatUint(st.AppliedIndex, 10)+")")
		return
	}
	api.WriteRaw(w, http.StatusOK, []byte(`{"ready":true}`+"\n"))
}
