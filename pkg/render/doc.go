// Package render turns a Bundle's files and a cluster's options into what Helm
// installs, as Fleet's agent does: the chart (a chart among the files, one downloaded
// into .chart/, or plain manifests with YAML overlays), then, after Helm, kustomize
// and the plain manifests. The agent deploys with it and `hub test` prints with it,
// so what `hub test` shows is what a cluster gets.
package render
