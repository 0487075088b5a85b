// Package version holds the Flotilla version, stamped at build time by the Makefile.
package version

// Version is the Flotilla release, e.g. "v0.1.0"; "dev" in an unstamped build.
var Version = "dev"
