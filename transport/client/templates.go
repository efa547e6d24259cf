package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/permitd/permitd/transport/api"
)

// templates.go: templates (PUT, GET, DELETE /v1/templates/{prefix}, GET
// /v1/templates): a reserve naming "prefix:key" creates that limit from
// its template on first use, and the register drops it once idle.

// TemplateSpec is a template as PutTemplate sends it: a limit's
// configuration (Shadow must be false), how long a key goes unused
// before it goes away (1s to 720h) and the most keys of the template live
// at once (1 to 2 097 152).
type TemplateSpec struct {
	LimitSpec
	Idle    time.Duration
	MaxKeys int64
}

// MarshalJSON encodes the spec as the body of PUT
// /v1/templates/{prefix} (api.TemplateSpec).
func (s TemplateSpec) MarshalJSON() ([]byte, error) {
	b, err := s.LimitSpec.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["idle"], m["max_keys"] = s.Idle.String(), s.MaxKeys
	return json.Marshal(m)
}

// Template is a template as the server answers it.
type Template struct {
	// Prefix: the template creates the limits "Prefix:key".
	Prefix string
	// LimitSpec is the configuration its keys are created with.
	LimitSpec
	// IntervalNanos is the compiled stable interval per permit.
	IntervalNanos int64
	// Idle is how long a key goes unused before it goes away; MaxKeys
	// the most keys live at once; LiveKeys how many live now (0 in
	// PutTemplate's answer).
	Idle              time.Duration
	MaxKeys, LiveKeys int64
	// Deleted (ListTemplates only) marks a deleted template whose keys
	// still live: it creates no key, and goes with its last.
	Deleted bool
	// Created (PutTemplate only) is true if no template of the prefix
	// existed.
	Created bool
}

// UnmarshalJSON decodes a template answer (api.Template, or
// api.TemplatePut).
func (t *Template) UnmarshalJSON(b []byte) error {
	var w api.TemplatePut
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	idle, err := time.ParseDuration(w.Idle)
	if err != nil {
		return fmt.Errorf("field \"idle\": %w", err)
	}
	*t = Template{Prefix: w.Prefix, IntervalNanos: w.IntervalNanos, Idle: idle, MaxKeys: w.MaxKeys, LiveKeys: w.LiveKeys, Deleted: w.Deleted, Created: w.Created}
	return t.LimitSpec.fromAPI(&w.LimitSpec)
}

// MarshalJSON encodes a template as the server does.
func (t Template) MarshalJSON() ([]byte, error) {
	b, err := t.LimitSpec.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["prefix"], m["interval_ns"], m["idle"] = t.Prefix, t.IntervalNanos, t.Idle.String()
	m["max_keys"], m["live_keys"], m["deleted"] = t.MaxKeys, t.LiveKeys, t.Deleted
	if t.Algorithm == "concurrency" {
		delete(m, "interval_ns")
	}
	return json.Marshal(m)
}

// TemplateDeleted is DeleteTemplate's answer (api.TemplateDeleted).
type TemplateDeleted = api.TemplateDeleted

func templatePath(prefix string) string { return "/v1/templates/" + url.PathEscape(prefix) }

// PutTemplate creates or replaces the template of prefix: keys already
// live keep the configuration they were created with.
func (c *Client) PutTemplate(ctx context.Context, prefix string, spec TemplateSpec) (Template, error) {
	var t Template
	err := c.call(ctx, http.MethodPut, templatePath(prefix), spec, &t)
	return t, err
}

// GetTemplate returns the template of prefix (ErrNotFound if there is
// none).
func (c *Client) GetTemplate(ctx context.Context, prefix string) (Template, error) {
	var t Template
	err := c.call(ctx, http.MethodGet, templatePath(prefix), nil, &t)
	return t, err
}

// ListTemplates returns every template, sorted by prefix (at most 1 024):
// the active ones, and the deleted ones whose keys still live (Deleted).
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out struct {
		Templates []Template `json:"templates"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/templates", nil, &out)
	return out.Templates, err
}

// DeleteTemplate deletes the template of prefix (ErrNotFound if there is
// none): it creates no more keys, and its live keys (LiveKeys of the
// answer) stay until they are idle.
func (c *Client) DeleteTemplate(ctx context.Context, prefix string) (TemplateDeleted, error) {
	var out TemplateDeleted
	err := c.call(ctx, http.MethodDelete, templatePath(prefix), nil, &out)
	return out, err
}
