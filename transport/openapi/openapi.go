package openapi

import _ "embed"

//go:embed openapi.json
var spec []byte

// JSON returns the OpenAPI 3.0 document of the register's HTTP API, the
// bytes of openapi.json. The slice is shared: callers must not modify it.
func JSON() []byte { return spec }
