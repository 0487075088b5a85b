// Package agent is the agent's runtime in a downstream cluster: it obtains the
// cluster's identity (registering with the bootstrap values when they are present),
// keeps that identity's token fresh, and checks in with the hub.
package agent
