// Package framework starts real Flotilla processes for integration tests: a hub with
// its embedded control plane, and downstream clusters ("hub controlplane"), each on
// fresh ports and directories and stopped when the test ends. Nothing here fakes the
// Kubernetes API; tests talk to real API servers through the returned configurations,
// or with the real kubectl and helm command-line tools through the kubeconfig paths.
package framework
