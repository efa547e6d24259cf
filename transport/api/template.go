package api

// template.go: a template as the API writes it (PUT, GET and DELETE
// /v1/templates/{prefix}, GET /v1/templates).

// TemplateSpec is the body of PUT /v1/templates/{prefix}: a limit's
// configuration as PUT /v1/limits/{name} takes it (Shadow must be false:
// keys made from a template are enforced), the idle time after which an
// unused key goes away (a Go duration string, 1s to 720h), and the most
// keys of the template live at once (1 to 2097152).
type TemplateSpec struct {
	LimitSpec
	Idle    string `json:"idle"`
	MaxKeys int64  `json:"max_keys"`
}

// Template is the answer to GET /v1/templates/{prefix}, and each entry
// of GET /v1/templates: the prefix, the configuration its keys are
// created with (Shadow is always false), its compiled interval, idle
// time and cap, how many of its keys live now, and whether it was
// deleted (only GET /v1/templates lists a deleted template, while its
// keys live: it creates no key, and goes with its last).
type Template struct {
	Prefix string `json:"prefix"`
	LimitSpec
	IntervalNanos int64  `json:"interval_ns"`
	Idle          string `json:"idle"`
	MaxKeys       int64  `json:"max_keys"`
	LiveKeys      int64  `json:"live_keys"`
	Deleted       bool   `json:"deleted"`
}

// TemplatePut is the answer to PUT /v1/templates/{prefix}: the template
// put, and whether it was created (201) or replaced (200).
type TemplatePut struct {
	Template
	Created bool `json:"created"`
}

// Templates is the answer to GET /v1/templates: every template, sorted
// by prefix.
type Templates struct {
	Templates []Template `json:"templates"`
}

// TemplateDeleted is the answer to DELETE /v1/templates/{prefix}: the
// template existed (and now creates no key), and how many of its keys
// live on until they are idle.
type TemplateDeleted struct {
	Prefix   string `json:"prefix"`
	Existed  bool   `json:"existed"`
	LiveKeys int64  `json:"live_keys"`
}
