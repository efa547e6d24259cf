package server

import (
	"embed"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/permitd/permitd/transport/api"
)

// ui.go: the status page, /ui: static files embedded in the binary that
// read the JSON API from the browser with the operator's token. The files
// hold no data, so they are served without a token (access); every number
// the page shows comes from an API call the token must be allowed.

//go:embed ui
var uiFiles embed.FS

// uiIndex is the page /ui serves.
const uiIndex = "index.html"

// uiSecurityPolicy lets the page run only its own script and style and
// talk only to the agent that served it: no inline code, no other origin,
// no framing.
const uiSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// isUIAsset reports whether escaped path p names a file of the status
// page's folder, /ui/{asset} (one path segment; whether it exists is
// serveUI's concern).
func isUIAsset(p string) bool {
	name, ok := strings.CutPrefix(p, "/ui/")
	return ok && name != "" && !strings.Contains(name, "/")
}

// uiContentTypes are the types of the page's files, by extension.
var uiContentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// serveUI answers the status page's file name, or 404 naming the page.
func serveUI(w http.ResponseWriter, name string) {
	body, err := uiFiles.ReadFile("ui/" + name)
	ct, known := uiContentTypes[path.Ext(name)]
	if err != nil || !known {
		api.WriteError(w, http.StatusNotFound, "no file "+api.Quote(name)+" in the status page; open /ui")
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", uiSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
