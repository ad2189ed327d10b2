// Package docs holds the API documentation that ships inside the binary:
// the OpenAPI description of the HTTP API, served at GET /openapi.yaml.
// (api.md, next to it, is the prose reference.)
package docs

import _ "embed"

// openAPI is a string, not a []byte, so that no caller can change it.
//
//go:embed openapi.yaml
var openAPI string

// OpenAPI returns docs/openapi.yaml, the OpenAPI 3.1 description of the HTTP
// API.
func OpenAPI() string { return openAPI }
