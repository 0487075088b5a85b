// Package controlplane runs a real Kubernetes control plane inside the calling process:
// embedded etcd, kube-apiserver and the kube-controller-manager controllers that
// Flotilla's own controllers rely on (garbage collection, namespace deletion, default
// ServiceAccounts, the root CA ConfigMap). Its state lives under one data directory and
// survives restarts. The hub's default mode and the integration tests use it.
package controlplane
