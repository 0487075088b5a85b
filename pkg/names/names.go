// Package names is the one place where Flotilla builds the names of namespaces,
// objects, labels and annotations, so no derived name is formatted twice.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	// SystemNamespace holds the hub itself (its leader Lease) on the hub cluster, and
	// the agent on a downstream cluster.
	SystemNamespace = "cattle-fleet-system"
	// RegistrationNamespace holds the credential Secrets agents pick up.
	RegistrationNamespace = "cattle-fleet-clusters-system"
	// HubLease is the Lease the hub replicas compete for.
	HubLease = "flotilla-hub"

	// AgentRelease is the Helm release, Deployment, ServiceAccount and ConfigMap name
	// of the agent downstream, and the name of a cluster's identity ServiceAccount in
	// its per-cluster namespace on the hub.
	AgentRelease = "fleet-agent"
	// AgentBootstrapSecret is the downstream Secret holding the registration values.
	AgentBootstrapSecret = "fleet-agent-bootstrap"
	// AgentIdentitySecret is the downstream Secret holding the cluster's identity.
	AgentIdentitySecret = "fleet-agent"
	// AgentConfigMap is the downstream ConfigMap holding clientID and labels.
	AgentConfigMap = "fleet-agent"
	// AgentReleasesConfigMap is the downstream ConfigMap, in the agent's namespace,
	// where the agent lists the releases it made and how to remove each.
	AgentReleasesConfigMap = "fleet-agent-releases"
	// AgentIdentityServiceAccount is the cluster identity in its per-cluster namespace.
	AgentIdentityServiceAccount = "fleet-agent"
	// AgentRecoveryServiceAccount, in a per-cluster namespace, may only ask for a new
	// identity, with a request signed by the cluster's agent key: what an agent whose
	// identity expired while it was offline authenticates with.
	AgentRecoveryServiceAccount = "fleet-agent-recovery"
	// AgentRecoveryClusterRole is what AgentRecoveryServiceAccount may do in its
	// per-cluster namespace.
	AgentRecoveryClusterRole = "flotilla-agent-recovery"
	// AgentLease is the Lease in its per-cluster namespace that an agent renews
	// between the check-ins that patch its Cluster's status.
	AgentLease = "fleet-agent"

	// AgentClusterRole is the shared ClusterRole a cluster identity is bound to in its
	// per-cluster namespace.
	AgentClusterRole = "flotilla-agent"
	// AgentContentsClusterRole lets a cluster identity get Contents by name.
	AgentContentsClusterRole = "flotilla-agent-contents"
	// RegistrationClusterRole lets a registration token create requests; it is bound
	// in the token's namespace only.
	RegistrationClusterRole = "flotilla-registration"
	// CredentialPickupClusterRole lets a registration token get Secrets by name in the
	// registration namespace; it is bound there once per token.
	CredentialPickupClusterRole = "flotilla-credential-pickup"

	// ManagedLabel marks objects the hub created and owns.
	ManagedLabel = "fleet.cattle.io/managed"
	// ClusterLabel names the Cluster an object belongs to.
	ClusterLabel = "fleet.cattle.io/cluster"
	// ClusterNamespaceLabel names the workspace of the Cluster an object belongs to.
	ClusterNamespaceLabel = "fleet.cattle.io/cluster-namespace"
	// ClusterUIDLabel, on a per-cluster namespace, is the UID of its Cluster: the hub
	// uses no namespace of that name made by anyone else, or for an earlier Cluster.
	ClusterUIDLabel = "fleet.cattle.io/cluster-uid"
	// RegistrationTokenLabel is set by the agent on its request to name the token it
	// registers with.
	RegistrationTokenLabel = "fleet.cattle.io/registration-token"
	// AgentKeyAnnotation, on a Cluster, is the fingerprint of the key its agent
	// registered with; later registrations must prove that key.
	AgentKeyAnnotation = "fleet.cattle.io/agent-key"
	// AgentKeyProofAnnotation, on a Cluster, is the request that last proved the key
	// and its signing time ("<request> <RFC 3339 time>"); only later ones are accepted.
	AgentKeyProofAnnotation = "fleet.cattle.io/agent-key-proof"
	// RequestPurposeAnnotation, on a request an agent makes in its per-cluster
	// namespace, says whether it renews the identity or recovers an expired one.
	RequestPurposeAnnotation = "fleet.cattle.io/purpose"
	// ApprovalAnnotation, on a registration request waiting for approval, is a hub
	// admin's answer: ApprovalApproved or ApprovalRefused. Token holders cannot set
	// it: the admission policy refuses annotations on their requests, and they may
	// not update requests.
	ApprovalAnnotation = "fleet.cattle.io/approval"
	ApprovalApproved   = "approved"
	ApprovalRefused    = "refused"
	// MoveToAnnotation, on a Cluster being moved to another hub (hub cluster move),
	// holds the registration values (JSON) of the token the new hub made for it: the
	// Cluster's agent bundle hands them to its agent, which registers there.
	MoveToAnnotation = "fleet.cattle.io/move-to"
	// MovedFromAnnotation, on a token bound to one Cluster (ClusterLabel), says the
	// Cluster moves here from the hub it names: only a request signed by the key the
	// Cluster is bound to registers with it.
	MovedFromAnnotation = "fleet.cattle.io/moved-from"
	// AnswerReaderAnnotation, on the Secret answering a registration request, is the
	// user name of the token ServiceAccount that may delete it once read.
	AnswerReaderAnnotation = "fleet.cattle.io/answer-reader"
	// AllowedWorkspacesAnnotation, on a kubeconfig Secret in a namespace of
	// --kubeconfig-secret-namespaces, lists the workspaces whose Clusters may use it
	// (comma-separated, or "*" for all).
	AllowedWorkspacesAnnotation = "fleet.cattle.io/allowed-workspaces"
	// SignatureAnnotation, on a Bundle and copied by the hub to its
	// BundleDeployments, is its author's signature (see package signing).
	SignatureAnnotation = "fleet.cattle.io/signature"
	// AgentTrustedKeysKey, in the downstream fleet-agent ConfigMap, holds the PEM
	// public keys whose signatures the agent requires of every Bundle.
	AgentTrustedKeysKey = "trustedKeys"
	// RequestLabel names the ClusterRegistrationRequest an object was made for.
	RequestLabel = "fleet.cattle.io/cluster-registration"
	// RequestNamespaceLabel is the namespace of the ClusterRegistrationRequest an
	// answer Secret was written for.
	RequestNamespaceLabel = "fleet.cattle.io/cluster-registration-namespace"
	// RequestKindLabel is the kind of the request an answer Secret was made for,
	// when it is not a ClusterRegistrationRequest: Fleet's ClusterRegistration.
	RequestKindLabel = "fleet.cattle.io/cluster-registration-kind"
	// ClientIDHashLabel is the hash of a clientID, for finding what belongs to it.
	ClientIDHashLabel = "fleet.cattle.io/client-id-hash"
	// BundleNameLabel names the Bundle a BundleDeployment deploys.
	BundleNameLabel = "fleet.cattle.io/bundle-name"
	// BundleNamespaceLabel names the workspace of the Bundle a BundleDeployment deploys.
	BundleNamespaceLabel = "fleet.cattle.io/bundle-namespace"
	// AgentBundleLabel marks the agent bundle of a cluster (and its BundleDeployment):
	// the agent deploys it as its own fleet-agent release.
	AgentBundleLabel = "fleet.cattle.io/agent-bundle"
	// BundleDeploymentLabel is set on the Helm release the agent made for a
	// BundleDeployment, so it can find releases whose BundleDeployment is gone.
	BundleDeploymentLabel = "fleet.cattle.io/bundle-deployment"
	// DeploymentIDLabel, on a release the agent made, is a hash of the deployment ID
	// it holds, so the agent notices when someone else has changed the release.
	DeploymentIDLabel = "fleet.cattle.io/deployment-id-hash"

	// ClusterCleanup names the Cluster removal handler; wrangler makes its finalizer
	// ClusterFinalizer from it.
	ClusterCleanup = "flotilla-cluster-cleanup"
	// ClusterFinalizer lets the hub clean up what lives outside a Cluster's namespace.
	ClusterFinalizer = "wrangler.cattle.io/" + ClusterCleanup
	// BundleCleanup names the Bundle removal handler, which deletes its
	// BundleDeployments (they live in other namespaces, out of reach of owner references).
	BundleCleanup = "flotilla-bundle-cleanup"
	// BundleFinalizer is the finalizer wrangler adds for the BundleCleanup handler; a
	// Bundle the hub creates itself carries it from the start, saving an update.
	BundleFinalizer = "wrangler.cattle.io/" + BundleCleanup

	// RegistrationValuesSecretType is the type of a token's values Secret.
	RegistrationValuesSecretType = "fleet.cattle.io/cluster-registration-values"
	// CredentialSecretType is the type of the Secret that hands an agent its identity.
	CredentialSecretType = "fleet.cattle.io/cluster-credential"
	// IdentitySecretType is the type of the agent's downstream identity Secret.
	IdentitySecretType = "fleet.cattle.io/agent-identity"

	// maxName is the longest name of most objects (a DNS label).
	maxName = 63
)

// Hash returns the first n hex characters of the sha256 of parts joined by NUL.
func Hash(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:n]
}

// Limit shortens name to at most max characters, replacing the end with a hash of
// the whole name so that shortened names stay distinct.
func Limit(name string, max int) string {
	if len(name) <= max {
		return name
	}
	const hashLen = 8
	return strings.TrimRight(name[:max-hashLen-1], "-.") + "-" + Hash(hashLen, name)
}

// ClusterForClientID is the name of a Cluster the hub creates for an agent that
// registers with clientID and matches no Cluster: "cluster-" and 12 hex characters.
func ClusterForClientID(clientID string) string {
	return "cluster-" + Hash(12, clientID)
}

// ClientIDHash is a label-safe digest of a clientID.
func ClientIDHash(clientID string) string {
	return Hash(32, clientID)
}

// ClusterNamespace is the per-cluster namespace of Cluster name in workspace:
// "cluster-<workspace>-<name>-<hash>", at most 63 characters. The hash, 16 hex digits
// (64 bits) of workspace and name, keeps apart the names of Clusters whose
// "cluster-<workspace>-<name>" had to be cut short.
func ClusterNamespace(workspace, name string) string {
	return clusterNamespace(clusterNamespaceHash, workspace, name)
}

// LegacyClusterNamespace is the per-cluster namespace hubs before 64-bit hashes
// made, with 8 hex digits; Clusters that have one keep it.
func LegacyClusterNamespace(workspace, name string) string {
	return clusterNamespace(legacyClusterNamespaceHash, workspace, name)
}

// IsClusterNamespaceOf says whether namespace is, in either form, the per-cluster
// namespace of Cluster name in workspace.
func IsClusterNamespaceOf(namespace, workspace, name string) bool {
	return namespace == ClusterNamespace(workspace, name) || namespace == LegacyClusterNamespace(workspace, name)
}

const (
	clusterNamespaceHash       = 16
	legacyClusterNamespaceHash = 8
)

func clusterNamespace(hashLen int, workspace, name string) string {
	hash := Hash(hashLen, workspace, name)
	base := "cluster-" + workspace + "-" + name
	if max := maxName - len(hash) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-.")
	}
	return base + "-" + hash
}

// IsClusterNamespace says whether namespace has the form of a per-cluster namespace:
// "cluster-", then a name, then "-" and the hex digits of ClusterNamespace or
// LegacyClusterNamespace.
func IsClusterNamespace(namespace string) bool {
	rest, ok := strings.CutPrefix(namespace, "cluster-")
	if !ok {
		return false
	}
	for _, hashLen := range []int{clusterNamespaceHash, legacyClusterNamespaceHash} {
		if len(rest) >= hashLen+2 && rest[len(rest)-hashLen-1] == '-' && isHex(rest[len(rest)-hashLen:]) {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// TokenServiceAccount is the ServiceAccount behind a ClusterRegistrationToken.
// It is "<token>-registration" whenever that fits a ServiceAccount name (253
// characters): the admission policy of registration requests relies on it.
func TokenServiceAccount(token string) string {
	return Limit(token+"-registration", 253)
}

// CredentialPickupBinding is the RoleBinding, in the registration namespace, that lets
// the token workspace/token pick up the credentials granted to its requests.
func CredentialPickupBinding(workspace, token string) string {
	suffix := "-" + Hash(8, workspace, token)
	return Limit("token-"+workspace+"-"+token, maxName-len(suffix)) + suffix
}

// CredentialSecret is the Secret in the registration namespace that hands the agent
// which sent a request with clientID and clientRandom its cluster identity. The agent
// computes the same name to fetch it.
func CredentialSecret(clientID, clientRandom string) string {
	return "c-" + Hash(40, clientID, clientRandom)
}

// FleetAnswerSecret is the name of the Secret Fleet's agent waits for after sending
// a ClusterRegistration: "c-" and the hex sha256 of clientID and clientRandom
// written one after the other, 63 characters in all, as Fleet names it.
func FleetAnswerSecret(clientID, clientRandom string) string {
	sum := sha256.Sum256([]byte(clientID + clientRandom))
	return ("c-" + hex.EncodeToString(sum[:]))[:63]
}

// ImportToken is the registration token the hub mints for one deployment of an
// imported Cluster's agent; each deployment gets a token of its own.
func ImportToken(cluster, deployment string) string {
	suffix := "-" + Hash(8, deployment)
	return Limit("import-"+cluster, maxName-len(suffix)) + suffix
}

// ClusterStatusRole is the Role in a workspace that lets a cluster's identity patch
// its own Cluster's status.
func ClusterStatusRole(cluster string) string {
	return Limit("flotilla-cluster-"+cluster, maxName)
}

// ContentsBinding is the ClusterRoleBinding that lets a cluster's identity get
// Contents; it is named after the cluster's (unique) per-cluster namespace.
func ContentsBinding(clusterNamespace string) string {
	return Limit("flotilla-contents-"+clusterNamespace, maxName)
}

// Content is the name of the Content holding resources whose JSON has sha256 sum.
func Content(sum string) string {
	return "s-" + sum
}

// AgentBundle is the Bundle that deploys cluster's own agent.
func AgentBundle(cluster string) string {
	return Limit("fleet-agent-"+cluster, maxName)
}

// ReleaseName is the Helm release name of a Bundle that does not name one: the
// Bundle's name, shortened to Helm's 53-character limit.
func ReleaseName(bundle string) string {
	return Limit(bundle, 53)
}

// Users and groups of the x509 client certificates the hub gives cluster identities.
const (
	clusterUserPrefix         = "flotilla:cluster:"
	clusterRecoveryUserPrefix = "flotilla:cluster-recovery:"
	// ClustersGroup is the group of every cluster identity certificate.
	ClustersGroup = "flotilla:clusters"
	// agentKeyGroupPrefix starts the group that names the fingerprint of the key a
	// certificate was issued for.
	agentKeyGroupPrefix = "flotilla:agent-key:"
)

// ClusterUser is the user of the certificate identity of the cluster whose
// per-cluster namespace is namespace; ClusterRecoveryUser that of its recovery
// certificate.
func ClusterUser(namespace string) string { return clusterUserPrefix + namespace }

// ClusterRecoveryUser is the user of the recovery certificate of the cluster whose
// per-cluster namespace is namespace.
func ClusterRecoveryUser(namespace string) string { return clusterRecoveryUserPrefix + namespace }

// AgentKeyGroup is the group naming the key (by fingerprint) a cluster's certificate
// was issued for.
func AgentKeyGroup(fingerprint string) string { return agentKeyGroupPrefix + fingerprint }

// ClusterUserOf reads a certificate identity's user name: the per-cluster namespace,
// and whether it is the recovery user. ok is false for any other user.
func ClusterUserOf(user string) (namespace string, recovery, ok bool) {
	if ns, found := strings.CutPrefix(user, clusterUserPrefix); found && IsClusterNamespace(ns) {
		return ns, false, true
	}
	if ns, found := strings.CutPrefix(user, clusterRecoveryUserPrefix); found && IsClusterNamespace(ns) {
		return ns, true, true
	}
	return "", false, false
}

// AgentKeyOf is the key fingerprint named by groups, or "".
func AgentKeyOf(groups []string) string {
	for _, g := range groups {
		if fp, found := strings.CutPrefix(g, agentKeyGroupPrefix); found {
			return fp
		}
	}
	return ""
}

// RegistrationRequest is the name of the ClusterRegistrationRequest an agent sends
// with clientID and clientRandom: a name only that agent knows, so that a
// registration token, which may get requests by name, reads only its own answer.
func RegistrationRequest(clientID, clientRandom string) string {
	return "r-" + Hash(40, clientID, clientRandom)
}
