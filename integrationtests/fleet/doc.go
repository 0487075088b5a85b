// Package fleet tests that Fleet's own programs work against a Flotilla hub: Fleet's
// agent, installed with Fleet's fleet-agent chart, registering with a Flotilla
// token's values.yaml and deploying Bundles.
//
// Fleet's programs are not part of this repository and are not built by it: the
// tests take Fleet's binaries (fleetagent) from the directory $FLEET_BIN and Fleet's
// charts from a checkout of rancher/fleet at $FLEET_SRC, both built and fetched by
// whoever runs them (docs/migrate-from-fleet.md says which versions were tested),
// and skip, saying so, without them.
package fleet
