package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/render"
	"github.com/flotilla/flotilla/pkg/target"
)

// invariant is one property of a converged fleet: how many things it looked at and
// the ones that break it.
type invariant struct {
	name       string
	count      int
	violations []string
}

func (i *invariant) failf(format string, args ...any) {
	i.violations = append(i.violations, fmt.Sprintf(format, args...))
}

// agentIdentity is an agent's clientID and the credential it holds.
type agentIdentity struct {
	name string
	cred *registration.Credential
	err  error
	// downstream keeps the agent's key.
	downstream registration.Downstream
}

func (f *chaosFleet) identities(ctx context.Context) []agentIdentity {
	var out []agentIdentity
	for i, a := range f.sims {
		out = append(out, agentIdentity{name: fmt.Sprintf("simulated agent %d", i), cred: a.agent.Credential(), downstream: a.agent.Downstream})
	}
	for _, a := range f.reals {
		cred, err := a.credential(ctx)
		out = append(out, agentIdentity{name: a.name, cred: cred, err: err, downstream: registration.Downstream{Client: a.ds.Client(), Namespace: names.SystemNamespace}})
	}
	return out
}

// check reads the fleet and evaluates every invariant.
func (f *chaosFleet) check(ctx context.Context) []invariant {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	kube := f.host.Client()
	api := f.client.FleetV1alpha1()
	read := invariant{name: "the hub's API answers"}
	fail := func(err error) []invariant {
		read.failf("%v", err)
		return []invariant{read}
	}
	clusters, err := api.Clusters(workspace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	bundles, err := api.Bundles(workspace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	deployments, err := api.BundleDeployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	contents, err := api.Contents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	requests, err := api.ClusterRegistrationRequests("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	accounts, err := kube.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	secrets, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	ids := f.identities(ctx)

	byName := map[string]*fleet.Cluster{}
	byNamespace := map[string]*fleet.Cluster{}
	byClientID := map[string][]string{}
	for i := range clusters.Items {
		c := &clusters.Items[i]
		byName[c.Name] = c
		byNamespace[clusterns.Name(c)] = c
		byClientID[c.Spec.ClientID] = append(byClientID[c.Spec.ClientID], c.Name)
	}

	one := invariant{name: "exactly one Cluster per agent's clientID", count: len(clusters.Items)}
	agents := map[string]bool{}
	for _, id := range ids {
		if id.cred == nil {
			one.failf("%s holds no identity (%v)", id.name, id.err)
			continue
		}
		agents[id.cred.ClientID] = true
		if n := len(byClientID[id.cred.ClientID]); n != 1 {
			one.failf("%s: %d Clusters %v", id.name, n, byClientID[id.cred.ClientID])
		}
	}
	for clientID, names := range byClientID {
		if !agents[clientID] {
			one.failf("Clusters %v have a clientID no agent holds", names)
		}
	}

	ready := invariant{name: "every Cluster Ready", count: len(clusters.Items)}
	for _, c := range clusters.Items {
		if cond := conditions.Get(c.Status.Conditions, fleet.ConditionReady); cond == nil || cond.Status != corev1.ConditionTrue {
			ready.failf("%s: %+v", c.Name, cond)
		}
	}

	bundleByName := map[string]*fleet.Bundle{}
	for i := range bundles.Items {
		bundleByName[bundles.Items[i].Name] = &bundles.Items[i]
	}
	current := invariant{name: "every BundleDeployment at its Bundle's current version, Ready", count: len(deployments.Items)}
	orphanBDs := invariant{name: "no orphaned BundleDeployments", count: len(deployments.Items)}
	perBundle := map[string]int{}
	usedContents := map[string]bool{}
	for _, b := range bundles.Items {
		if b.Spec.ContentsID != "" {
			usedContents[b.Spec.ContentsID] = true
		}
		if b.Status.ObservedGeneration != b.Generation {
			current.failf("Bundle %s: generation %d not processed (observed %d)", b.Name, b.Generation, b.Status.ObservedGeneration)
		}
	}
	for _, bd := range deployments.Items {
		key := bd.Namespace + "/" + bd.Name
		usedContents[target.ContentName(bd.Spec.DeploymentID)] = true
		c := byNamespace[bd.Namespace]
		b := bundleByName[bd.Labels[names.BundleNameLabel]]
		if c == nil || b == nil || bd.Labels[names.BundleNamespaceLabel] != workspace {
			orphanBDs.failf("%s: Cluster found %t, Bundle %s/%s found %t", key, c != nil, bd.Labels[names.BundleNamespaceLabel], bd.Labels[names.BundleNameLabel], b != nil)
			continue
		}
		perBundle[b.Name]++
		switch {
		case target.ContentName(bd.Spec.StagedDeploymentID) != names.Content(b.Status.ResourcesSHA256Sum):
			current.failf("%s: staged %s, the Bundle's resources are %s", key, bd.Spec.StagedDeploymentID, names.Content(b.Status.ResourcesSHA256Sum))
		case bd.Spec.DeploymentID != bd.Spec.StagedDeploymentID:
			current.failf("%s: deploys %s, staged %s", key, bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID)
		case bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID:
			current.failf("%s: applied %s, wants %s", key, bd.Status.AppliedDeploymentID, bd.Spec.DeploymentID)
		case bundlestate.Of(&bd) != fleet.Ready:
			current.failf("%s: %s", key, bundlestate.Of(&bd))
		}
	}
	for b := range f.revs {
		name := fmt.Sprintf("chaos-%d", b)
		if perBundle[name] != len(clusters.Items) {
			current.failf("Bundle %s has %d BundleDeployments for %d Clusters", name, perBundle[name], len(clusters.Items))
		}
	}

	orphans := invariant{name: "no orphaned per-cluster namespaces"}
	for _, ns := range namespaces.Items {
		if !names.IsClusterNamespace(ns.Name) {
			continue
		}
		orphans.count++
		if c := byNamespace[ns.Name]; c == nil || ns.Labels[names.ClusterUIDLabel] != string(c.UID) {
			orphans.failf("namespace %s (labels %v)", ns.Name, ns.Labels)
		}
	}
	orphanSAs := invariant{name: "no orphaned ServiceAccounts"}
	for _, sa := range accounts.Items {
		owner, labelled := sa.Labels[names.ClusterLabel]
		switch {
		case labelled:
			orphanSAs.count++
			if byName[owner] == nil {
				orphanSAs.failf("%s/%s of Cluster %s", sa.Namespace, sa.Name, owner)
			}
		case names.IsClusterNamespace(sa.Namespace):
			orphanSAs.count++
			if byNamespace[sa.Namespace] == nil {
				orphanSAs.failf("%s/%s", sa.Namespace, sa.Name)
			}
		case sa.Namespace == workspace && sa.Name != "default":
			orphanSAs.count++
			if sa.Name != names.TokenServiceAccount("chaos") {
				orphanSAs.failf("%s/%s", sa.Namespace, sa.Name)
			}
		}
	}
	orphanSecrets := invariant{name: "no orphaned Secrets (identities, answers)"}
	requestNames := map[string]bool{}
	for _, r := range requests.Items {
		requestNames[r.Name] = true
	}
	for _, s := range secrets.Items {
		owner, labelled := s.Labels[names.ClusterLabel]
		switch {
		case string(s.Type) == names.CredentialSecretType:
			orphanSecrets.count++
			if !requestNames[s.Labels[names.RequestLabel]] {
				orphanSecrets.failf("answer %s/%s of request %s, which is gone", s.Namespace, s.Name, s.Labels[names.RequestLabel])
			}
		case labelled:
			orphanSecrets.count++
			if byName[owner] == nil {
				orphanSecrets.failf("%s/%s of Cluster %s", s.Namespace, s.Name, owner)
			}
		case names.IsClusterNamespace(s.Namespace):
			orphanSecrets.count++
			if byNamespace[s.Namespace] == nil {
				orphanSecrets.failf("%s/%s", s.Namespace, s.Name)
			}
		}
	}
	// Answered requests go after --request-retention; none is left unanswered.
	orphanRequests := invariant{name: "no registration requests left", count: len(requests.Items)}
	for _, r := range requests.Items {
		orphanRequests.failf("%s/%s (granted %t)", r.Namespace, r.Name, r.Status.Granted)
	}
	orphanContents := invariant{name: "no orphaned Contents", count: len(contents.Items)}
	for _, c := range contents.Items {
		if !usedContents[c.Name] {
			orphanContents.failf("%s (created %s)", c.Name, c.CreationTimestamp.Format("15:04:05"))
		}
	}

	releases := invariant{name: "every Helm release downstream has its BundleDeployment, none pending"}
	for _, a := range f.reals {
		f.checkReleases(ctx, a, byNamespace, deployments.Items, &releases)
	}

	creds := invariant{name: "every agent's credential is valid and is its Cluster's", count: len(ids)}
	for _, id := range ids {
		if id.cred == nil {
			creds.failf("%s holds no identity (%v)", id.name, id.err)
			continue
		}
		if err := f.checkCredential(ctx, id.downstream, *id.cred, byName); err != nil {
			creds.failf("%s: %v", id.name, err)
		}
	}
	return []invariant{one, ready, current, orphanBDs, orphans, orphanSAs, orphanSecrets, orphanRequests, orphanContents, releases, creds}
}

// checkReleases compares the Helm releases on a real agent's cluster with its
// BundleDeployments on the hub.
func (f *chaosFleet) checkReleases(ctx context.Context, a *realAgent, byNamespace map[string]*fleet.Cluster, deployments []fleet.BundleDeployment, inv *invariant) {
	secrets, err := a.ds.Client().CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		inv.failf("%s: %v", a.name, err)
		return
	}
	cred, err := a.credential(ctx)
	if err != nil {
		inv.failf("%s: %v", a.name, err)
		return
	}
	want := map[string]bool{}
	for _, bd := range deployments {
		if c := byNamespace[bd.Namespace]; c != nil && c.Spec.ClientID == cred.ClientID {
			want[render.ReleaseNamespace(bd.Spec.Options)+"/"+render.ReleaseName(bd.Spec.Options, bd.Name)] = true
		}
	}
	latest := map[string]corev1.Secret{}
	for _, s := range secrets.Items {
		key := s.Namespace + "/" + s.Labels["name"]
		if prev, ok := latest[key]; !ok || version(s) > version(prev) {
			latest[key] = s
		}
	}
	for _, key := range slices.Sorted(maps.Keys(latest)) {
		inv.count++
		if status := latest[key].Labels["status"]; strings.HasPrefix(status, "pending") {
			inv.failf("%s: release %s is %s", a.name, key, status)
		}
		if !want[key] {
			inv.failf("%s: release %s has no BundleDeployment", a.name, key)
		}
	}
}

// credential is the identity the real agent stored in its cluster.
func (a *realAgent) credential(ctx context.Context) (*registration.Credential, error) {
	secret, err := a.ds.Client().CoreV1().Secrets("cattle-fleet-system").Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cred, err := registration.CredentialFromSecretData(secret.Data)
	if err != nil {
		return nil, err
	}
	return &cred, nil
}

func version(s corev1.Secret) int {
	var v int
	fmt.Sscan(s.Labels["version"], &v)
	return v
}

// checkCredential asks the hub's API server who the credential is: it must
// authenticate, as the identity of the Cluster it names.
func (f *chaosFleet) checkCredential(ctx context.Context, d registration.Downstream, cred registration.Credential, byName map[string]*fleet.Cluster) error {
	cfg := rest.AnonymousClientConfig(f.host.RESTConfig())
	cfg.BearerToken = cred.Token
	if cred.HasCertificate() {
		var err error
		if cfg, _, err = d.HubClient(ctx, cred); err != nil {
			return err
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("the hub does not take it: %w", err)
	}
	c := byName[cred.ClusterName]
	if c == nil {
		return fmt.Errorf("it names Cluster %s, which does not exist", cred.ClusterName)
	}
	user := review.Status.UserInfo.Username
	if want := "system:serviceaccount:" + clusterns.Name(c) + ":"; !strings.HasPrefix(user, want) && user != names.ClusterUser(clusterns.Name(c)) {
		return fmt.Errorf("it is %s, not an identity of Cluster %s (%s*)", user, c.Name, want)
	}
	return nil
}
