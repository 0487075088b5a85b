// Package conformance measures Flotilla against Fleet on the public
// rancher/fleet-examples repository (a copy is in testdata/fleet-examples): the
// Bundles `hub apply` makes of each example, compared with those Fleet's `fleet apply`
// made (tests/expected/*/bundle.yaml).
package conformance
