package api

import (
	_ "embed"
	"net/http"
	"sort"
	"sync"
)

// RouteOpenAPI serves the API's OpenAPI 3.1 description.
const RouteOpenAPI = "GET /openapi.json"

// openAPIDoc is the OpenAPI 3.1 document of every route, kept in the
// repository beside this file. It is generated from the route table and
// the wire types by `go test ./internal/server/api -run TestOpenAPIDocument
// -update`, and TestOpenAPIDocument fails when the committed file is stale,
// when a route the API registers is not described, or when a documented
// example no longer has the shape the handler returns.
//
//go:embed openapi.json
var openAPIDoc []byte

func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDoc)
}

// routeMux is the API's ServeMux, remembering every pattern mounted on it
// so that the routes can be listed (Routes) and checked against the
// OpenAPI document.
type routeMux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.mu.Lock()
	m.patterns = append(m.patterns, pattern)
	m.mu.Unlock()
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Routes returns the patterns mounted on the API ("GET /v1/stats", ...),
// sorted. Safe for concurrent use.
func (a *API) Routes() []string {
	a.mux.mu.Lock()
	defer a.mux.mu.Unlock()
	out := append([]string(nil), a.mux.patterns...)
	sort.Strings(out)
	return out
}
