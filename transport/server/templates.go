package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
)

// templates.go: PUT, GET and DELETE /v1/templates/{prefix}, GET
// /v1/templates (fsm/template.go: keys "prefix:key" created on first use,
// dropped when idle).

// templateRequest is the body of PUT /v1/templates/{prefix}: a limit's
// body (shadow must be false) and the template's own fields.
type templateRequest struct {
	limitRequest
	Idle    api.Opt[string] `json:"idle"`
	MaxKeys api.Opt[int64]  `json:"max_keys"`
}

// templateFields describes templateRequest's fields for error messages.
var templateFields = append(api.Fields{
	{"idle", `a Go duration string from "1s" to "720h": how long a key goes unused before it goes away (required)`},
	{"max_keys", "an integer from 1 to 2097152: the most keys of the template live at once (required)"},
}, limitFields...)

// templatePrefix checks a template prefix from a path.
func templatePrefix(prefix string) *api.Error {
	if err := fsm.ValidateTemplatePrefix(prefix); err != nil {
		return api.BadRequest("%s", invalidText(err))
	}
	return nil
}

// invalidText is an fsm validation error without its package's prefix.
func invalidText(err error) string {
	return strings.TrimPrefix(err.Error(), fsm.ErrInvalidCommand.Error()+": ")
}

// template validates req and turns it into the command that puts the
// template of prefix.
func (req *templateRequest) template(prefix string) (fsm.PutTemplate, *api.Error) {
	t := fsm.PutTemplate{Prefix: prefix}
	if req.Shadow.Set && req.Shadow.V {
		return t, api.BadRequest(`field "shadow": true; allowed: false (keys made from a template are enforced; put a key explicitly for shadow mode)`)
	}
	if !req.Idle.Set {
		return t, api.BadRequest(`field "idle" is required; allowed: %s`, templateFields.Help("idle"))
	}
	idle, herr := api.ParseDuration("idle", req.Idle.V, false)
	if herr != nil {
		return t, herr
	}
	if int64(idle) < fsm.MinTemplateIdleNanos || int64(idle) > fsm.MaxTemplateIdleNanos {
		return t, api.BadRequest(`field "idle": %s; allowed: %s`, api.Quote(req.Idle.V), templateFields.Help("idle"))
	}
	if !req.MaxKeys.Set {
		return t, api.BadRequest(`field "max_keys" is required; allowed: %s`, templateFields.Help("max_keys"))
	}
	if req.MaxKeys.V < 1 || req.MaxKeys.V > fsm.MaxTemplatedKeys {
		return t, api.BadRequest(`field "max_keys": %d; allowed: %s`, req.MaxKeys.V, templateFields.Help("max_keys"))
	}
	spec, herr := req.spec()
	if herr != nil {
		return t, herr
	}
	cfg, err := bucket.Compile(spec)
	if err != nil {
		return t, api.BadRequest("template %s: %s", api.Quote(prefix), node.Message(err))
	}
	t.Config, t.IdleNanos, t.MaxKeys = cfg, int64(idle), req.MaxKeys.V
	if err := t.Validate(); err != nil {
		return t, api.BadRequest("%s", invalidText(err))
	}
	return t, nil
}

// newTemplateView is a template as the API shows it.
func newTemplateView(t fsm.TemplateInfo) api.Template {
	c := newLimitView("", t.Config, 0, false)
	return api.Template{Prefix: t.Prefix, LimitSpec: c.LimitSpec, IntervalNanos: c.IntervalNanos,
		Idle: time.Duration(t.IdleNanos).String(), MaxKeys: t.MaxKeys, LiveKeys: t.LiveKeys, Deleted: t.Deleted}
}

// dispatchTemplates routes /v1/templates and /v1/templates/{prefix}. It
// returns routeUnknown, having written nothing, for any other path.
func (h *handler) dispatchTemplates(w http.ResponseWriter, r *http.Request, p string) route {
	if p == "/v1/templates" {
		if h.method(w, r, "GET, HEAD") {
			h.listTemplates(w, r)
		}
		return routeTemplates
	}
	prefix, ok := strings.CutPrefix(p, "/v1/templates/")
	if !ok || strings.IndexByte(prefix, '/') >= 0 {
		return routeUnknown
	}
	prefix = pathName(prefix)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.getTemplate(w, r, prefix)
	case http.MethodPut:
		h.putTemplate(w, r, prefix)
	case http.MethodDelete:
		h.deleteTemplate(w, r, prefix)
	default:
		api.MethodNotAllowed(w, r, "GET, HEAD, PUT, DELETE")
	}
	return routeTemplate
}

func (h *handler) putTemplate(w http.ResponseWriter, r *http.Request, prefix string) {
	if herr := templatePrefix(prefix); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	var req templateRequest
	if herr := readObject(w, r, &req, templateFields); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	t, herr := req.template(prefix)
	if herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.PutTemplate(ctx, t)
	if err != nil {
		h.storeError(w, "put template", err)
		return
	}
	if res.Detail != "" {
		api.WriteError(w, http.StatusBadRequest, res.Detail)
		return
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	view := newTemplateView(fsm.TemplateInfo{Prefix: prefix, Config: t.Config, IdleNanos: t.IdleNanos, MaxKeys: t.MaxKeys})
	api.WriteJSON(w, code, api.TemplatePut{Template: view, Created: res.Created})
}

func (h *handler) getTemplate(w http.ResponseWriter, r *http.Request, prefix string) {
	if herr := templatePrefix(prefix); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	t, err := h.store.Template(ctx, prefix)
	if err != nil {
		h.storeError(w, "get template", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, newTemplateView(t))
}

func (h *handler) listTemplates(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) > 0 {
		api.WriteError(w, http.StatusBadRequest, "GET /v1/templates takes no query parameters (it answers every template, at most "+
			strconv.Itoa(fsm.MaxTemplates)+")")
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	ts, err := h.store.Templates(ctx)
	if err != nil {
		h.storeError(w, "list templates", err)
		return
	}
	out := api.Templates{Templates: make([]api.Template, 0, len(ts))}
	for _, t := range ts {
		out.Templates = append(out.Templates, newTemplateView(t))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (h *handler) deleteTemplate(w http.ResponseWriter, r *http.Request, prefix string) {
	if herr := templatePrefix(prefix); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if herr := h.emptyBody(w, r); herr != nil {
		api.WriteError(w, herr.Code, herr.Msg)
		return
	}
	if len(r.URL.RawQuery) > 0 {
		api.WriteError(w, http.StatusBadRequest, "DELETE /v1/templates/{prefix} takes no query parameters")
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	res, err := h.store.DeleteTemplate(ctx, prefix)
	if err != nil {
		h.storeError(w, "delete template", err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.TemplateDeleted{Prefix: prefix, Existed: res.Existed, LiveKeys: res.LiveKeys})
}
