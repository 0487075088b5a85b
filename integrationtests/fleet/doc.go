// Package fleet tests that Fleet's own programs work against a Flotilla hub: Fleet's
// agent, installed with Fleet's fleet-agent chart, registering with a Flotilla
// token's values.yaml, deploying Bundles (one made by Fleet's `fleet apply`), and
// replaced in place by Flotilla's agent through the agent bundle.
//
// Fleet's programs are not part of this repository and are not built by it: see
// framework.FleetBinary.
package fleet
