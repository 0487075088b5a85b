package bundles

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controlplane"
	"github.com/flotilla/flotilla/pkg/names"
)

// rolloutBundle is a Bundle to every cluster: a ConfigMap at a version and, from
// version 2 on, a Deployment, which no kubelet makes ready (the test does).
func rolloutBundle(name string, version int, strategy string) string {
	deployment := ""
	if version >= 2 {
		deployment = fmt.Sprintf(`
  - name: deployment.yaml
    content: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: %[1]s
      spec:
        replicas: 1
        selector:
          matchLabels: {app: %[1]s}
        template:
          metadata:
            labels: {app: %[1]s, version: "%[2]d"}
          spec:
            containers:
            - name: web
              image: flotilla/none:%[2]d`, name, version)
	}
	return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %[1]s
  namespace: clusters
spec:
  defaultNamespace: %[1]s
  rolloutStrategy:
%[3]s
  resources:
  - name: configmap.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: %[1]s
      data:
        version: "%[2]d"%[4]s
  targets:
  - clusterSelector: {}
`, name, version, strategy, deployment)
}

func getBundle(ctx context.Context, hub *framework.Hub, name string) (*fleet.Bundle, error) {
	return hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, name, framework.Get)
}

// released lists, by cluster name, the clusters whose BundleDeployment of bundle holds
// its current version.
func released(ctx context.Context, hub *framework.Hub, bundle string) ([]string, error) {
	list, err := hub.Fleet().FleetV1alpha1().BundleDeployments("").List(ctx, metav1.ListOptions{LabelSelector: names.BundleNameLabel + "=" + bundle})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, bd := range list.Items {
		if bd.Spec.DeploymentID != "" && bd.Spec.DeploymentID == bd.Spec.StagedDeploymentID {
			out = append(out, bd.Labels[names.ClusterLabel])
		}
	}
	sort.Strings(out)
	return out, nil
}

// waitRollout waits until the Bundle's Rollout column reads display, exactly the
// clusters want hold the current version, and (unless empty) its RolledOut message
// holds waiting.
func waitRollout(t *testing.T, hub *framework.Hub, bundle, display string, want []string, waiting string) {
	t.Helper()
	sort.Strings(want)
	framework.Eventually(t, fmt.Sprintf("Bundle %s to read %q, released to %v", bundle, display, want), timeout, func(ctx context.Context) error {
		b, err := getBundle(ctx, hub, bundle)
		if err != nil {
			return err
		}
		got, err := released(ctx, hub, bundle)
		if err != nil {
			return err
		}
		c := conditions.Get(b.Status.Conditions, fleet.ConditionRolledOut)
		switch {
		case b.Status.Display.Rollout != display:
			return fmt.Errorf("rollout %q; conditions %+v", b.Status.Display.Rollout, b.Status.Conditions)
		case !slices.Equal(got, want):
			return fmt.Errorf("released to %v", got)
		case c == nil:
			return fmt.Errorf("no RolledOut condition")
		case waiting != "" && !strings.Contains(c.Message, waiting):
			return fmt.Errorf("RolledOut message %q", c.Message)
		}
		return nil
	})
}

// hasDeployment says whether the cluster runs the Deployment of version.
func hasDeployment(ctx context.Context, d *downstream, name string, version int) (bool, error) {
	dep, err := d.Client().AppsV1().Deployments(name).Get(ctx, name, framework.Get)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return dep.Spec.Template.Labels["version"] == fmt.Sprint(version), nil
}

// rollOut does what the kubelet would: reports the cluster's Deployment rolled out.
func rollOut(t *testing.T, d *downstream, name string) {
	t.Helper()
	framework.Eventually(t, "the Deployment "+name+" on "+d.ClusterName+" to be rolled out", timeout, func(ctx context.Context) error {
		dep, err := d.Client().AppsV1().Deployments(name).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		dep.Status = controlplane.RolledOutDeploymentStatus(dep, time.Now())
		_, err = d.Client().AppsV1().Deployments(name).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
		return err
	})
}

// waitBundleMessage waits until the Bundle's Ready message holds each of parts.
func waitBundleMessage(t *testing.T, hub *framework.Hub, name string, parts ...string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("Bundle %s to say %q", name, parts), timeout, func(ctx context.Context) error {
		b, err := getBundle(ctx, hub, name)
		if err != nil {
			return err
		}
		msg := readyMessage(b.Status.Conditions)
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				return fmt.Errorf("Ready message %q", msg)
			}
		}
		return nil
	})
}

func helmReleases(t *testing.T, d *downstream) string {
	t.Helper()
	out, err := d.Helm("list", "-A", "-q", "--all")
	if err != nil {
		t.Fatalf("helm list on %s: %v", d.Name, err)
	}
	return out
}

// TestRollouts: with three clusters, dependsOn holds a Bundle until the one it
// needs is ready; maxUnavailable and partitions release a change cluster by cluster
// as each turns ready, and a pause holds it; a serviceAccount, which a Policy can
// require, limits what a Bundle may create; targetNamespace moves objects and refuses
// cluster-scoped ones; deleteNamespace removes the namespace made for a Bundle.
func TestRollouts(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	clusters := register(t, hub, map[string]string{"r1": "r1", "r2": "r2", "r3": "r3"})
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].ClusterName < clusters[j].ClusterName })
	all := []string{clusters[0].ClusterName, clusters[1].ClusterName, clusters[2].ClusterName}

	t.Run("a Bundle waits for the Bundle it depends on", func(t *testing.T) {
		broken := `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: db
  namespace: clusters
spec:
  defaultNamespace: db
  resources:
  - name: db.yaml
    content: |
      apiVersion: %s
      kind: %s
      metadata:
        name: db
  targets:
  - clusterSelector: {}
`
		hub.MustKubectl(fmt.Sprintf(broken, "example.com/v1", "NoSuchKind"), "apply", "-f", "-")
		hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: app
  namespace: clusters
spec:
  defaultNamespace: app
  dependsOn:
  - name: db
  resources:
  - name: app.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: app
  targets:
  - clusterSelector: {}
`, "apply", "-f", "-")
		waitBundleMessage(t, hub, "db", "ErrApplied(3)")
		waitBundleMessage(t, hub, "app", "WaitApplied(3)", "waiting for its dependencies: Bundle db is ErrApplied")
		for _, d := range clusters {
			if out := helmReleases(t, d); strings.Contains(out, "app") {
				t.Fatalf("%s deployed app before db is ready: %s", d.ClusterName, out)
			}
		}
		hub.MustKubectl(fmt.Sprintf(broken, "v1", "ConfigMap"), "apply", "-f", "-")
		waitBundleReady(t, hub, "app", "3/3")
		for _, d := range clusters {
			getConfigMap(t, d, "app", "app")
		}

		for _, pair := range [][2]string{{"loop-a", "loop-b"}, {"loop-b", "loop-a"}} {
			hub.MustKubectl(fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %s
  namespace: clusters
spec:
  dependsOn:
  - name: %s
  targets:
  - clusterSelector: {}
`, pair[0], pair[1]), "apply", "-f", "-")
		}
		waitProcessed(t, hub, "loop-a", "InvalidDependsOn", "cycle: loop-a → loop-b → loop-a")
		waitProcessed(t, hub, "loop-b", "InvalidDependsOn", "cycle: loop-b → loop-a → loop-b")
		hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "db", "app", "loop-a", "loop-b")
	})

	t.Run("maxUnavailable 1 releases a change cluster by cluster, as each turns ready", func(t *testing.T) {
		strategy := "    maxUnavailable: 1"
		hub.MustKubectl(rolloutBundle("web", 1, strategy), "apply", "-f", "-")
		waitBundleReady(t, hub, "web", "3/3")

		hub.MustKubectl(rolloutBundle("web", 2, strategy), "apply", "-f", "-")
		waitRollout(t, hub, "web", "1/3 released, waiting", all[:1], "2 clusters wait: 1 of 3 clusters unavailable, maxUnavailable 1")
		first := clusters[0]
		framework.Eventually(t, "the first cluster to run version 2, not ready", timeout, func(ctx context.Context) error {
			if ok, err := hasDeployment(ctx, first, "web", 2); !ok || err != nil {
				return fmt.Errorf("no Deployment yet: %v", err)
			}
			b, err := getBundle(ctx, hub, "web")
			if err != nil {
				return err
			}
			if b.Status.Summary.NotReady != 1 || b.Status.Summary.OutOfSync != 2 {
				return fmt.Errorf("summary %+v", b.Status.Summary)
			}
			return nil
		})
		// The hub has seen the first cluster not ready: the change goes no further.
		waitRollout(t, hub, "web", "1/3 released, waiting", all[:1], "1 of 3 clusters unavailable")
		for _, d := range clusters[1:] {
			if ok, err := hasDeployment(context.Background(), d, "web", 2); ok || err != nil {
				t.Fatalf("%s runs version 2 while the first cluster is not ready (%v)", d.ClusterName, err)
			}
		}

		// Paused mid-rollout, it holds; resumed, it waits for readiness again.
		hub.MustKubectl("", "-n", workspace, "patch", "bundles.fleet.cattle.io", "web", "--type=merge", "-p", `{"spec":{"paused":true}}`)
		waitRollout(t, hub, "web", "1/3 released, paused", all[:1], "2 clusters paused")
		hub.MustKubectl("", "-n", workspace, "patch", "bundles.fleet.cattle.io", "web", "--type=merge", "-p", `{"spec":{"paused":false}}`)
		waitRollout(t, hub, "web", "1/3 released, waiting", all[:1], "")

		rollOut(t, first, "web")
		waitRollout(t, hub, "web", "2/3 released, waiting", all[:2], "1 cluster wait")
		framework.Eventually(t, "the second cluster to run version 2", timeout, func(ctx context.Context) error {
			if ok, err := hasDeployment(ctx, clusters[1], "web", 2); !ok || err != nil {
				return fmt.Errorf("not yet: %v", err)
			}
			return nil
		})
		rollOut(t, clusters[1], "web")
		waitRollout(t, hub, "web", "", all, "")
		framework.Eventually(t, "the third cluster to run version 2", timeout, func(ctx context.Context) error {
			if ok, err := hasDeployment(ctx, clusters[2], "web", 2); !ok || err != nil {
				return fmt.Errorf("not yet: %v", err)
			}
			return nil
		})
		rollOut(t, clusters[2], "web")
		waitBundleReady(t, hub, "web", "3/3")
		out := hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "web")
		if !strings.Contains(out, "ROLLOUT") {
			t.Errorf("kubectl get bundles has no Rollout column:\n%s", out)
		}
		hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "web")
	})

	t.Run("partitions by label roll out in their order", func(t *testing.T) {
		// The canary is the cluster whose name sorts last: the order is the partitions'.
		canary := clusters[2]
		for _, d := range clusters {
			stage := "prod"
			if d == canary {
				stage = "canary"
			}
			hub.MustKubectl("", "-n", workspace, "label", "clusters.fleet.cattle.io", d.ClusterName, "stage="+stage, "--overwrite")
		}
		strategy := `    maxUnavailable: 1
    partitions:
    - name: canary
      clusterSelector:
        matchLabels: {stage: canary}
    - name: prod
      clusterSelector:
        matchLabels: {stage: prod}`
		hub.MustKubectl(rolloutBundle("staged", 1, strategy), "apply", "-f", "-")
		waitBundleReady(t, hub, "staged", "3/3")
		hub.MustKubectl(rolloutBundle("staged", 2, strategy), "apply", "-f", "-")
		waitRollout(t, hub, "staged", "1/3 released, waiting", []string{canary.ClusterName}, "2 clusters wait")
		b, err := getBundle(context.Background(), hub, "staged")
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, p := range b.Status.PartitionStatus {
			parts = append(parts, fmt.Sprintf("%s:%d", p.Name, p.Count))
		}
		if strings.Join(parts, " ") != "canary:1 prod:2" {
			t.Errorf("partitions %v", parts)
		}
		rollOut(t, canary, "staged")
		waitRollout(t, hub, "staged", "2/3 released, waiting", []string{canary.ClusterName, clusters[0].ClusterName}, "1 cluster wait")
		hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "staged")
	})

	d := clusters[0]
	t.Run("a serviceAccount limits what a Bundle may create", func(t *testing.T) {
		d.MustKubectl(`apiVersion: v1
kind: Namespace
metadata:
  name: tenant
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: tenant-deployer
  namespace: cattle-fleet-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: everything
  namespace: tenant
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: tenant-deployer
  namespace: tenant
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: everything
subjects:
- kind: ServiceAccount
  name: tenant-deployer
  namespace: cattle-fleet-system
`, "apply", "-f", "-")
		tenantBundle := func(name, sa string, clusterRole bool) string {
			extra := ""
			if clusterRole {
				extra = `
  - name: clusterrole.yaml
    content: |
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      metadata:
        name: tenant-escalation
      rules:
      - apiGroups: ["*"]
        resources: ["*"]
        verbs: ["*"]`
			}
			return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %s
  namespace: clusters
spec:
  defaultNamespace: tenant
  serviceAccount: %s
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: %s%s
  targets:
  - clusterName: %s
`, name, sa, name, extra, d.ClusterName)
		}
		hub.MustKubectl(tenantBundle("tenant-app", "tenant-deployer", false), "apply", "-f", "-")
		hub.MustKubectl(tenantBundle("tenant-escalation", "tenant-deployer", true), "apply", "-f", "-")
		hub.MustKubectl(tenantBundle("tenant-nobody", "nobody", false), "apply", "-f", "-")
		waitBundleReady(t, hub, "tenant-app", "1/1")
		getConfigMap(t, d, "tenant", "tenant-app")
		waitBundleMessage(t, hub, "tenant-escalation", "ErrApplied(1)", "forbidden", "system:serviceaccount:cattle-fleet-system:tenant-deployer", "clusterroles")
		waitBundleMessage(t, hub, "tenant-nobody", "ErrApplied(1)", "there is no ServiceAccount cattle-fleet-system/nobody")
		if _, err := d.Client().RbacV1().ClusterRoles().Get(context.Background(), "tenant-escalation", framework.Get); !apierrors.IsNotFound(err) {
			t.Fatalf("the ClusterRole of a Bundle limited to a namespace exists: %v", err)
		}

		// The attack on removal: a hook that runs only when the release is removed,
		// which the agent would run with its own rights if it removed the release so.
		hub.MustKubectl(fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: tenant-hook
  namespace: clusters
spec:
  defaultNamespace: tenant
  serviceAccount: tenant-deployer
  resources:
  - name: Chart.yaml
    content: |
      apiVersion: v2
      name: tenant-hook
      version: 1.0.0
  - name: templates/cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: tenant-hook
  - name: templates/hook.yaml
    content: |
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      metadata:
        name: tenant-hook-escalation
        annotations:
          helm.sh/hook: pre-delete
      roleRef:
        apiGroup: rbac.authorization.k8s.io
        kind: ClusterRole
        name: cluster-admin
      subjects:
      - kind: ServiceAccount
        name: tenant-deployer
        namespace: cattle-fleet-system
  targets:
  - clusterName: %s
`, d.ClusterName), "apply", "-f", "-")
		waitBundleReady(t, hub, "tenant-hook", "1/1")
		hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "tenant-hook")
		framework.Eventually(t, "the agent to have tried to remove the release, as the serviceAccount", timeout, func(ctx context.Context) error {
			// The hook is refused, so the release stays, and the agent says why.
			want := `uninstalling release tenant/tenant-hook: clusterrolebindings.rbac.authorization.k8s.io \"tenant-hook-escalation\" is forbidden: User \"system:serviceaccount:cattle-fleet-system:tenant-deployer\"`
			if !strings.Contains(d.Agent.Log(), want) {
				return fmt.Errorf("the agent's log does not say %s", want)
			}
			if out := helmReleases(t, d); !strings.Contains(out, "tenant-hook") {
				return fmt.Errorf("the release is gone: %s", out)
			}
			return nil
		})
		if _, err := d.Client().RbacV1().ClusterRoleBindings().Get(context.Background(), "tenant-hook-escalation", framework.Get); !apierrors.IsNotFound(err) {
			t.Fatalf("the removal hook ran with more rights than the Bundle's serviceAccount: %v", err)
		}
	})

	t.Run("targetNamespace moves objects and refuses cluster-scoped ones", func(t *testing.T) {
		moved := func(name, kind string) string {
			return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %[1]s
  namespace: clusters
spec:
  namespace: moved
  resources:
  - name: object.yaml
    content: |
      apiVersion: %[2]s
      metadata:
        name: %[1]s
        namespace: elsewhere
  targets:
  - clusterName: %[3]s
`, name, kind, d.ClusterName)
		}
		hub.MustKubectl(moved("moved-config", "v1\n      kind: ConfigMap"), "apply", "-f", "-")
		hub.MustKubectl(moved("moved-role", "rbac.authorization.k8s.io/v1\n      kind: ClusterRole"), "apply", "-f", "-")
		waitBundleReady(t, hub, "moved-config", "1/1")
		getConfigMap(t, d, "moved", "moved-config")
		waitBundleMessage(t, hub, "moved-role", "ErrApplied(1)", "ClusterRole", "moved-role")
		if _, err := d.Client().RbacV1().ClusterRoles().Get(context.Background(), "moved-role", framework.Get); !apierrors.IsNotFound(err) {
			t.Fatalf("the cluster-scoped object was deployed: %v", err)
		}

		// Helm does not post-render hooks, nor the CustomResourceDefinitions in a
		// chart's crds/: the agent keeps both under the same rule.
		chart := func(name, file, object string) *fleet.Bundle {
			return &fleet.Bundle{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: fleet.BundleSpec{
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "moved"},
					Resources: []fleet.BundleResource{
						{Name: "Chart.yaml", Content: "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n"},
						{Name: "templates/cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"},
						{Name: file, Content: object},
					},
					Targets: []fleet.BundleTarget{{ClusterName: d.ClusterName}},
				},
			}
		}
		hookConfig := `apiVersion: v1
kind: ConfigMap
metadata:
  name: hook-config-made
  namespace: elsewhere
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation`
		createBundle(t, hub, chart("hook-config", "templates/hook.yaml", hookConfig))
		hookRole := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: hook-role-made
  annotations:
    helm.sh/hook: pre-install`
		createBundle(t, hub, chart("hook-role", "templates/hook.yaml", hookRole))
		crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}`
		createBundle(t, hub, chart("hook-crd", "crds/widget.yaml", crd))

		waitBundleReady(t, hub, "hook-config", "1/1")
		getConfigMap(t, d, "moved", "hook-config-made")
		if _, err := d.Client().CoreV1().ConfigMaps("elsewhere").Get(context.Background(), "hook-config-made", framework.Get); !apierrors.IsNotFound(err) {
			t.Fatalf("the hook kept its own namespace: %v", err)
		}
		waitBundleMessage(t, hub, "hook-role", "ErrApplied(1)", "hook ClusterRole hook-role-made is cluster-scoped")
		if _, err := d.Client().RbacV1().ClusterRoles().Get(context.Background(), "hook-role-made", framework.Get); !apierrors.IsNotFound(err) {
			t.Fatalf("the cluster-scoped hook was created: %v", err)
		}
		waitBundleMessage(t, hub, "hook-crd", "ErrApplied(1)", "crds/widget.yaml holds CustomResourceDefinitions")
		if out, err := d.Kubectl("", "get", "crd", "widgets.example.com"); err == nil {
			t.Fatalf("the chart's CustomResourceDefinition was installed: %s", out)
		}
	})

	t.Run("deleteNamespace removes the namespace made for the Bundle, and only that", func(t *testing.T) {
		d.MustKubectl("", "create", "namespace", "preexisting")
		for _, ns := range []string{"ephemeral", "preexisting"} {
			hub.MustKubectl(fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %[1]s
  namespace: clusters
spec:
  defaultNamespace: %[1]s
  deleteNamespace: true
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: %[1]s
  targets:
  - clusterName: %[2]s
`, ns, d.ClusterName), "apply", "-f", "-")
			waitBundleReady(t, hub, ns, "1/1")
		}
		hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "ephemeral", "preexisting")
		framework.Eventually(t, "the namespace made for the Bundle to be deleted", timeout, func(ctx context.Context) error {
			ns, err := d.Client().CoreV1().Namespaces().Get(ctx, "ephemeral", framework.Get)
			if apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil) {
				return nil
			}
			return fmt.Errorf("namespace ephemeral: %v", err)
		})
		framework.Eventually(t, "the release in the namespace that was there before to be gone", timeout, func(ctx context.Context) error {
			if out := helmReleases(t, d); strings.Contains(out, "preexisting") {
				return fmt.Errorf("releases %s", out)
			}
			return nil
		})
		ns, err := d.Client().CoreV1().Namespaces().Get(context.Background(), "preexisting", framework.Get)
		if err != nil || ns.DeletionTimestamp != nil {
			t.Fatalf("the namespace that was there before the Bundle is deleted: %v", err)
		}
	})

	t.Run("a Policy requires a serviceAccount", func(t *testing.T) {
		hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Policy
metadata:
  name: tenants
  namespace: clusters
requireServiceAccount: true
allowedServiceAccounts: [tenant-deployer]
`, "apply", "-f", "-")
		waitProcessed(t, hub, "moved-config", "PolicyViolation", "Policy tenants", "has no serviceAccount, and one is required")
		waitProcessed(t, hub, "tenant-nobody", "PolicyViolation", `serviceAccount "nobody" is not among the allowed tenant-deployer`)
		framework.Eventually(t, "the agent bundles and tenant-app to stay Processed", timeout, func(ctx context.Context) error {
			for _, name := range []string{"tenant-app", names.AgentBundle(d.ClusterName)} {
				b, err := getBundle(ctx, hub, name)
				if err != nil {
					return err
				}
				if !conditions.IsTrue(b.Status.Conditions, fleet.ConditionProcessed) {
					return fmt.Errorf("%s: %+v", name, b.Status.Conditions)
				}
			}
			return nil
		})
		hub.MustKubectl("", "-n", workspace, "delete", "policies.fleet.cattle.io", "tenants")
		waitBundleReady(t, hub, "moved-config", "1/1")
	})
}
