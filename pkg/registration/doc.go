// Package registration is the registration protocol that the hub and the agent share:
// the values a ClusterRegistrationToken hands out, the credential the hub grants a
// request, how labels are sanitised, the RBAC of each upstream identity, and the
// agent's side of registering (Register) and of keeping its credential fresh (Renewer).
package registration
