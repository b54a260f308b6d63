package main

import "github.com/quotad/quotad/internal/forwardauth"

// loadForwardAuth reads the rules of GET /v1/forward-auth from the file
// cfg names, or returns the default rules (the X-Quotad-* headers) when it
// names none. A bad file stops quotad at start-up.
func loadForwardAuth(cfg *config) (*forwardauth.Rules, error) {
	if cfg.ForwardAuthConfig == "" {
		return forwardauth.Default(), nil
	}
	return forwardauth.Load(cfg.ForwardAuthConfig)
}
