package gitrepo

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestRestrict(t *testing.T) {
	repo := func(spec fleet.GitRepoSpec) *fleet.GitRepo {
		if spec.Repo == "" {
			spec.Repo = "https://github.com/example/apps"
		}
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: "team"}, Spec: spec}
	}
	restriction := func(name string, r fleet.GitRepoRestriction) *fleet.GitRepoRestriction {
		r.Name, r.Namespace = name, "team"
		return &r
	}
	sas := restriction("sas", fleet.GitRepoRestriction{DefaultServiceAccount: "deployer", AllowedServiceAccounts: []string{"deployer", "reader"}})
	for _, tc := range []struct {
		name         string
		gr           *fleet.GitRepo
		restrictions []*fleet.GitRepoRestriction
		want         Allowed
		refused      string // in the error, "" if allowed
	}{
		{"no restrictions", repo(fleet.GitRepoSpec{ServiceAccount: "any", ClientSecretName: "s"}), nil, Allowed{"any", "s"}, ""},
		{"the default service account", repo(fleet.GitRepoSpec{}), []*fleet.GitRepoRestriction{sas}, Allowed{ServiceAccount: "deployer"}, ""},
		{"an allowed service account", repo(fleet.GitRepoSpec{ServiceAccount: "reader"}), []*fleet.GitRepoRestriction{sas}, Allowed{ServiceAccount: "reader"}, ""},
		{"a service account not allowed", repo(fleet.GitRepoSpec{ServiceAccount: "admin"}), []*fleet.GitRepoRestriction{sas}, Allowed{}, `serviceAccount "admin" is not allowed`},
		{"no service account where one is required", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedServiceAccounts: []string{"deployer"}})}, Allowed{}, "serviceAccount is required"},
		{"the first default by name", repo(fleet.GitRepoSpec{}), []*fleet.GitRepoRestriction{
			restriction("b", fleet.GitRepoRestriction{DefaultServiceAccount: "second", DefaultClientSecretName: "b-secret"}),
			restriction("a", fleet.GitRepoRestriction{DefaultServiceAccount: "first"}),
		}, Allowed{"first", "b-secret"}, ""},
		{"lists add up", repo(fleet.GitRepoSpec{ServiceAccount: "two"}), []*fleet.GitRepoRestriction{
			restriction("a", fleet.GitRepoRestriction{AllowedServiceAccounts: []string{"one"}}),
			restriction("b", fleet.GitRepoRestriction{AllowedServiceAccounts: []string{"two"}}),
		}, Allowed{ServiceAccount: "two"}, ""},
		{"an allowed repository, verbatim", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedRepoPatterns: []string{"https://github.com/example/apps"}})}, Allowed{}, ""},
		{"an allowed repository, by pattern", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedRepoPatterns: []string{`https://github\.com/example/.*`}})}, Allowed{}, ""},
		{"a pattern matches the whole URL", repo(fleet.GitRepoSpec{Repo: "https://evil.example/github.com/example/apps"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedRepoPatterns: []string{`github\.com/example/.*`}})}, Allowed{}, "is not allowed"},
		{"a repository not allowed", repo(fleet.GitRepoSpec{Repo: "https://github.com/other/apps"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedRepoPatterns: []string{`https://github\.com/example/.*`}})}, Allowed{}, `repo "https://github.com/other/apps" is not allowed`},
		{"a broken pattern", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedRepoPatterns: []string{`(`}})}, Allowed{}, "not a regular expression"},
		{"an allowed target namespace", repo(fleet.GitRepoSpec{TargetNamespace: "apps"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedTargetNamespaces: []string{"apps"}})}, Allowed{}, ""},
		{"a target namespace not allowed", repo(fleet.GitRepoSpec{TargetNamespace: "kube-system"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedTargetNamespaces: []string{"apps"}})}, Allowed{}, `targetNamespace "kube-system" is not allowed`},
		{"no target namespace where one is required", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedTargetNamespaces: []string{"apps"}})}, Allowed{}, "targetNamespace is required"},
		{"a namespace selector is not matched downstream yet", repo(fleet.GitRepoSpec{TargetNamespace: "apps"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedTargetNamespaceSelector: &metav1.LabelSelector{}})}, Allowed{}, "allowedTargetNamespaceSelector"},
		{"a client secret not allowed", repo(fleet.GitRepoSpec{ClientSecretName: "someone-elses"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedClientSecretNames: []string{"ours"}})}, Allowed{}, `clientSecretName "someone-elses" is not allowed`},
		{"a helm secret not allowed", repo(fleet.GitRepoSpec{HelmSecretName: "admins"}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{AllowedClientSecretNames: []string{"ours"}})}, Allowed{}, `helmSecretName "admins" is not allowed`},
		{"the default client secret", repo(fleet.GitRepoSpec{}),
			[]*fleet.GitRepoRestriction{restriction("r", fleet.GitRepoRestriction{DefaultClientSecretName: "ours", AllowedClientSecretNames: []string{"ours"}})}, Allowed{ClientSecretName: "ours"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Restrict(tc.gr, tc.restrictions)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Restrict = %v, want an error with %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Restrict: %v", err)
			}
			if got != tc.want {
				t.Errorf("Restrict = %+v, want %+v", got, tc.want)
			}
		})
	}
}
