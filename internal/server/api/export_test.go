package api

// OpenAPI returns the embedded OpenAPI document (a copy), for the contract
// test; the server serves it at GET /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }
