package controlplane

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestIdentityAuthorizerAllowsWhatTheIdentityRBACWould(t *testing.T) {
	a, err := newIdentityAuthorizer(denyAll, namespaceLister())
	if err != nil {
		t.Fatal(err)
	}
	ns := names.ClusterNamespace("clusters", "a")
	other := names.ClusterNamespace("clusters", "b")
	identity := &user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, names.AgentIdentityServiceAccount), Groups: serviceaccount.MakeGroupNames(ns)}
	request := func(u user.Info, verb, namespace, resource, subresource, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: namespace, APIGroup: "fleet.cattle.io",
			Resource: resource, Subresource: subresource, Name: name, ResourceRequest: true}
	}
	core := func(r authorizer.AttributesRecord) authorizer.AttributesRecord { r.APIGroup = ""; return r }

	cases := map[string]struct {
		attrs authorizer.AttributesRecord
		allow bool
	}{
		"list its BundleDeployments":            {request(identity, "list", ns, "bundledeployments", "", ""), true},
		"watch its BundleDeployments":           {request(identity, "watch", ns, "bundledeployments", "", ""), true},
		"patch a BundleDeployment's status":     {request(identity, "patch", ns, "bundledeployments", "status", "x"), true},
		"renew its own token":                   {core(request(identity, "create", ns, "serviceaccounts", "token", names.AgentIdentityServiceAccount)), true},
		"get a Content by name":                 {request(identity, "get", "", "contents", "", "s-abc"), true},
		"get its Cluster":                       {request(identity, "get", "clusters", "clusters", "", "a"), true},
		"patch its Cluster's status":            {request(identity, "patch", "clusters", "clusters", "status", "a"), true},
		"patch its Cluster's spec":              {request(identity, "patch", "clusters", "clusters", "", "a"), false},
		"patch another Cluster's status":        {request(identity, "patch", "clusters", "clusters", "status", "b"), false},
		"its namesake in another workspace":     {request(identity, "patch", "other", "clusters", "status", "a"), false},
		"list Clusters":                         {request(identity, "list", "clusters", "clusters", "", ""), false},
		"list Contents":                         {request(identity, "list", "", "contents", "", ""), false},
		"list another's BundleDeployments":      {request(identity, "list", other, "bundledeployments", "", ""), false},
		"update a BundleDeployment's spec":      {request(identity, "update", ns, "bundledeployments", "", "x"), false},
		"read Secrets of its namespace":         {core(request(identity, "list", ns, "secrets", "", "")), false},
		"a token for another ServiceAccount":    {core(request(identity, "create", ns, "serviceaccounts", "token", "default")), false},
		"another ServiceAccount of the ns":      {request(&user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, "default")}, "list", ns, "bundledeployments", "", ""), false},
		"the name in a namespace not a cluster": {request(&user.DefaultInfo{Name: serviceaccount.MakeUsername("clusters", names.AgentIdentityServiceAccount)}, "list", "clusters", "bundledeployments", "", ""), false},
		"a user, not a ServiceAccount":          {request(&user.DefaultInfo{Name: "fleet-agent"}, "list", ns, "bundledeployments", "", ""), false},
	}
	for what, c := range cases {
		decision, reason, err := a.Authorize(context.Background(), c.attrs)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		switch {
		case c.allow && decision != authorizer.DecisionAllow:
			t.Errorf("%s: not allowed", what)
		case !c.allow && decision != authorizer.DecisionNoOpinion:
			t.Errorf("%s: decision %v (%s), want no opinion, for RBAC to decide", what, decision, reason)
		}
	}
	nonResource := authorizer.AttributesRecord{User: identity, Verb: "get", Path: "/api"}
	if decision, _, _ := a.Authorize(context.Background(), nonResource); decision != authorizer.DecisionNoOpinion {
		t.Errorf("a non-resource request: decision %v, want no opinion", decision)
	}
}

// namespaceLister holds the namespaces the certificate identity tests need.
func namespaceLister(namespaces ...*corev1.Namespace) corelisters.NamespaceLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range namespaces {
		_ = indexer.Add(ns)
	}
	return corelisters.NewNamespaceLister(indexer)
}

func TestCertificateIdentities(t *testing.T) {
	const key, otherKey = "SHA256:abc", "SHA256:def"
	namespace := func(name, key string, deleting bool) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{names.AgentKeyAnnotation: key}}}
		if deleting {
			ns.DeletionTimestamp = &metav1.Time{}
		}
		return ns
	}
	ns := names.ClusterNamespace("clusters", "a")
	deleting := names.ClusterNamespace("clusters", "deleting")
	gone := names.ClusterNamespace("clusters", "gone")
	unannotated := names.ClusterNamespace("clusters", "old")
	a, err := newIdentityAuthorizer(denyAll, namespaceLister(namespace(ns, key, false), namespace(deleting, key, true), namespace(unannotated, "", false)))
	if err != nil {
		t.Fatal(err)
	}
	cert := func(name string, key string) *user.DefaultInfo {
		return &user.DefaultInfo{Name: name, Groups: []string{names.ClustersGroup, names.AgentKeyGroup(key)}}
	}
	identity, recovery := cert(names.ClusterUser(ns), key), cert(names.ClusterRecoveryUser(ns), key)
	request := func(u user.Info, verb, namespace, resource, subresource, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: namespace, APIGroup: "fleet.cattle.io",
			Resource: resource, Subresource: subresource, Name: name, ResourceRequest: true}
	}
	core := func(r authorizer.AttributesRecord) authorizer.AttributesRecord { r.APIGroup = ""; return r }
	for what, c := range map[string]struct {
		attrs authorizer.AttributesRecord
		allow bool
	}{
		"list its BundleDeployments":                {request(identity, "list", ns, "bundledeployments", "", ""), true},
		"patch its Cluster's status":                {request(identity, "patch", "clusters", "clusters", "status", "a"), true},
		"get a Content by name":                     {request(identity, "get", "", "contents", "", "s-abc"), true},
		"ask for its next identity":                 {request(identity, "create", ns, "clusterregistrationrequests", "", ""), true},
		"watch the answer by name":                  {request(identity, "watch", ns, "clusterregistrationrequests", "", "r-abc"), true},
		"mint a ServiceAccount token":               {core(request(identity, "create", ns, "serviceaccounts", "token", names.AgentIdentityServiceAccount)), false},
		"create a ServiceAccount":                   {core(request(identity, "create", ns, "serviceaccounts", "", "")), false},
		"another Cluster's status":                  {request(identity, "patch", "clusters", "clusters", "status", "b"), false},
		"a certificate for another key":             {request(cert(names.ClusterUser(ns), otherKey), "list", ns, "bundledeployments", "", ""), false},
		"a certificate naming no key":               {request(&user.DefaultInfo{Name: names.ClusterUser(ns)}, "list", ns, "bundledeployments", "", ""), false},
		"a deleted Cluster's certificate":           {request(cert(names.ClusterUser(gone), key), "list", gone, "bundledeployments", "", ""), false},
		"a certificate while its ns is deleted":     {request(cert(names.ClusterUser(deleting), key), "list", deleting, "bundledeployments", "", ""), false},
		"a revoked identity (annotation removed)":   {request(cert(names.ClusterUser(unannotated), key), "list", unannotated, "bundledeployments", "", ""), false},
		"recovery: ask for a new identity":          {request(recovery, "create", ns, "clusterregistrationrequests", "", ""), true},
		"recovery: watch the answer":                {request(recovery, "watch", ns, "clusterregistrationrequests", "", "r-abc"), true},
		"recovery: list BundleDeployments":          {request(recovery, "list", ns, "bundledeployments", "", ""), false},
		"recovery: its Cluster's status":            {request(recovery, "patch", "clusters", "clusters", "status", "a"), false},
		"recovery: requests in another namespace":   {request(recovery, "create", "clusters", "clusterregistrationrequests", "", ""), false},
		"a user named like one, not a cluster's ns": {request(cert("flotilla:cluster:clusters", key), "list", "clusters", "bundledeployments", "", ""), false},
	} {
		decision, reason, err := a.Authorize(context.Background(), c.attrs)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if got := decision == authorizer.DecisionAllow; got != c.allow {
			t.Errorf("%s: allowed %v (%s), want %v", what, got, reason, c.allow)
		}
	}
}

var denyAll = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
})

func TestACredentialWatchIsAuthorizedAsItsGet(t *testing.T) {
	token := &user.DefaultInfo{Name: serviceaccount.MakeUsername("clusters", "new-token-registration")}
	// RBAC as the credential pickup RoleBinding has it: get Secrets there by name.
	rbac := authorizer.AuthorizerFunc(func(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
		if attrs.GetUser().GetName() == token.Name && attrs.GetVerb() == "get" && attrs.GetNamespace() == names.RegistrationNamespace && attrs.GetResource() == "secrets" {
			return authorizer.DecisionAllow, "RBAC", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	a, err := newIdentityAuthorizer(rbac, namespaceLister())
	if err != nil {
		t.Fatal(err)
	}
	secrets := func(u user.Info, verb, namespace, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: namespace, Resource: "secrets", Name: name, ResourceRequest: true}
	}
	other := &user.DefaultInfo{Name: "someone"}
	for what, c := range map[string]struct {
		attrs authorizer.AttributesRecord
		allow bool
	}{
		"watch its credential":            {secrets(token, "watch", names.RegistrationNamespace, "c-abc"), true},
		"list its credential":             {secrets(token, "list", names.RegistrationNamespace, "c-abc"), true},
		"watch every Secret there":        {secrets(token, "watch", names.RegistrationNamespace, ""), false},
		"watch a Secret elsewhere":        {secrets(token, "watch", "kube-system", "c-abc"), false},
		"someone RBAC lets get nothing":   {secrets(other, "watch", names.RegistrationNamespace, "c-abc"), false},
		"get, which RBAC alone decides":   {secrets(token, "get", names.RegistrationNamespace, "c-abc"), false},
		"delete, which RBAC would refuse": {secrets(token, "delete", names.RegistrationNamespace, "c-abc"), false},
	} {
		decision, _, err := a.Authorize(context.Background(), c.attrs)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if got := decision == authorizer.DecisionAllow; got != c.allow {
			t.Errorf("%s: allowed %v, want %v", what, got, c.allow)
		}
	}
}

func TestARegistrationTokenMayReadItselfOnly(t *testing.T) {
	a, err := newIdentityAuthorizer(denyAll, namespaceLister())
	if err != nil {
		t.Fatal(err)
	}
	token := &user.DefaultInfo{Name: serviceaccount.MakeUsername("clusters", "new-token-registration")}
	tokens := func(u user.Info, verb, namespace, name, subresource string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: namespace, APIGroup: "fleet.cattle.io",
			Resource: "clusterregistrationtokens", Subresource: subresource, Name: name, ResourceRequest: true}
	}
	for _, c := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		allow bool
	}{
		{"get itself", tokens(token, "get", "clusters", "new-token", ""), true},
		{"get another token", tokens(token, "get", "clusters", "other-token", ""), false},
		{"get a token of its name in another workspace", tokens(token, "get", "fleet-default", "new-token", ""), false},
		{"list the tokens", tokens(token, "list", "clusters", "", ""), false},
		{"update itself", tokens(token, "update", "clusters", "new-token", ""), false},
		{"update its status", tokens(token, "update", "clusters", "new-token", "status"), false},
		{"another ServiceAccount", tokens(&user.DefaultInfo{Name: serviceaccount.MakeUsername("clusters", "new-token")}, "get", "clusters", "new-token", ""), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			decision, _, err := a.Authorize(context.Background(), c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got := decision == authorizer.DecisionAllow; got != c.allow {
				t.Fatalf("allowed %v, want %v", got, c.allow)
			}
		})
	}
}
