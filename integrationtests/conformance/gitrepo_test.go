package conformance

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/gittest"
)

// TestFleetExamplesDeployFromAGitRepo puts every example of fleet-examples in a Git
// repository served with basic auth, as Fleet users keep it, and has one GitRepo
// deploy them to three clusters labelled env=dev, test and prod: each gets every
// object Fleet's expected output has for its environment. A folder whose chart is in
// a repository that wants basic auth gets it through helmSecretName.
func TestFleetExamplesDeployFromAGitRepo(t *testing.T) {
	repo := newChartRepository(t)
	git := gittest.Start(t, "git", "s3cret")
	var paths []string
	for _, ex := range examples(t) {
		git.CopyDir(localExample(t, ex.Case, repo), ex.Case)
		if ex.Case == "single-cluster/helm-multi-chart" {
			// Only its guestbook, as in TestFleetExamplesDeployToLabelledClusters.
			paths = append(paths, ex.Case+"/guestbook")
			continue
		}
		paths = append(paths, ex.Case)
	}
	git.Write("private/fleet.yaml", []byte("defaultNamespace: from-private-repo\nhelm:\n  repo: "+repo.URL+"/private\n  chart: guestbook\n  version: ^0.0.1\n"))
	paths = append(paths, "private")
	commit := git.Commit("fleet-examples")

	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8")
	clusters := framework.RegisterSimulatedClusters(t, hub, deployWorkspace, map[string]string{"dev": "dev", "test": "test", "prod": "prod"})
	hub.MustKubectl("apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: default\n  namespace: "+deployWorkspace+"\nspec:\n  selector: {}\n", "apply", "-f", "-")
	hub.MustKubectl("", "-n", deployWorkspace, "create", "secret", "generic", "git-auth", "--type=kubernetes.io/basic-auth",
		"--from-literal=username=git", "--from-literal=password=s3cret")
	hub.MustKubectl("", "-n", deployWorkspace, "create", "secret", "generic", "helm-auth", "--type=kubernetes.io/basic-auth",
		"--from-literal=username=u", "--from-literal=password=p")
	gitrepo := fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: examples
  namespace: %s
spec:
  repo: %s
  branch: main
  clientSecretName: git-auth
  helmSecretName: helm-auth
  helmRepoURLRegex: %s
  paths:
  - %s
`, deployWorkspace, git.URL, regexp.QuoteMeta(repo.URL+"/private/"), strings.Join(paths, "\n  - "))
	applied := time.Now()
	hub.MustKubectl(gitrepo, "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", deployWorkspace, "wait", "--for=condition=Ready", "gitrepos.fleet.cattle.io/examples", "--timeout=300s"); err != nil {
		t.Fatalf("GitRepo not Ready: %v\n%s\n%s", err, out, hub.MustKubectl("", "-n", deployWorkspace, "get", "gitrepos.fleet.cattle.io", "examples", "-o", "yaml"))
	}
	t.Logf("kubectl apply of the GitRepo to Ready with every example on 3 clusters: %s", time.Since(applied).Round(100*time.Millisecond))
	t.Logf("\n%s", hub.MustKubectl("", "-n", deployWorkspace, "get", "gitrepos.fleet.cattle.io,bundles.fleet.cattle.io"))
	if got := hub.MustKubectl("", "-n", deployWorkspace, "get", "gitrepos.fleet.cattle.io", "examples", "-o", "jsonpath={.status.commit}"); got != commit {
		t.Errorf("status.commit %s, want %s", got, commit)
	}

	found := expectDeployed(t, clusters)
	for _, d := range clusters {
		if err := dynamicFor(t, d.Cluster).exists("apps/v1", "Deployment", "from-private-repo", "frontend"); err != nil {
			t.Errorf("cluster %s: the guestbook chart of the private repository: %v", d.Name, err)
		}
		t.Logf("cluster %s: %d objects of Fleet's expected output found, and the private chart", d.Name, found[d.Name])
	}
}
