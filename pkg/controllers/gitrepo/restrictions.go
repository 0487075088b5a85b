package gitrepo

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ReasonRestricted is Accepted=False for a GitRepo a GitRepoRestriction refuses.
const ReasonRestricted = "Restricted"

// Allowed is what a GitRepo may use once its namespace's GitRepoRestrictions are
// applied: its own choices, or the restrictions' defaults.
type Allowed struct {
	ServiceAccount   string
	ClientSecretName string
}

// Restrict applies the GitRepoRestrictions of gr's namespace to gr, as Fleet does,
// with two differences that close gaps: a repository pattern must match the whole
// URL (Fleet's matches anywhere in it, so "github.com/org" also let
// "https://evil.example/github.com/org" in), and when AllowedServiceAccounts is
// set a GitRepo may not go without a service account (Fleet lets it deploy as the
// agent itself).
func Restrict(gr *fleet.GitRepo, restrictions []*fleet.GitRepoRestriction) (Allowed, error) {
	allowed := Allowed{ServiceAccount: gr.Spec.ServiceAccount, ClientSecretName: gr.Spec.ClientSecretName}
	if len(restrictions) == 0 {
		return allowed, nil
	}
	r := aggregate(restrictions)
	if allowed.ServiceAccount == "" {
		allowed.ServiceAccount = r.DefaultServiceAccount
	}
	if allowed.ClientSecretName == "" {
		allowed.ClientSecretName = r.DefaultClientSecretName
	}
	ns := gr.Spec.TargetNamespace
	switch {
	case (len(r.AllowedTargetNamespaces) > 0 || r.AllowedTargetNamespaceSelector != nil) && ns == "":
		return allowed, fmt.Errorf("targetNamespace is required: the GitRepoRestrictions allow only %s", list(r.AllowedTargetNamespaces))
	case len(r.AllowedTargetNamespaces) > 0 && !slices.Contains(r.AllowedTargetNamespaces, ns):
		return allowed, fmt.Errorf("targetNamespace %q is not allowed: the GitRepoRestrictions allow %s", ns, list(r.AllowedTargetNamespaces))
	case r.AllowedTargetNamespaceSelector != nil && !slices.Contains(r.AllowedTargetNamespaces, ns):
		return allowed, fmt.Errorf("targetNamespace %q is not in allowedTargetNamespaces, and Flotilla does not match allowedTargetNamespaceSelector against downstream namespaces yet", ns)
	}
	if len(r.AllowedServiceAccounts) > 0 {
		if allowed.ServiceAccount == "" {
			return allowed, fmt.Errorf("serviceAccount is required: the GitRepoRestrictions allow only %s", list(r.AllowedServiceAccounts))
		}
		if !slices.Contains(r.AllowedServiceAccounts, allowed.ServiceAccount) {
			return allowed, fmt.Errorf("serviceAccount %q is not allowed: the GitRepoRestrictions allow %s", allowed.ServiceAccount, list(r.AllowedServiceAccounts))
		}
	}
	if len(r.AllowedClientSecretNames) > 0 && allowed.ClientSecretName != "" && !slices.Contains(r.AllowedClientSecretNames, allowed.ClientSecretName) {
		return allowed, fmt.Errorf("clientSecretName %q is not allowed: the GitRepoRestrictions allow %s", allowed.ClientSecretName, list(r.AllowedClientSecretNames))
	}
	// helmSecretName names a credential too, sent where helmRepoURLRegex says: the
	// same list bounds it (Fleet does not).
	if h := gr.Spec.HelmSecretName; len(r.AllowedClientSecretNames) > 0 && h != "" && !slices.Contains(r.AllowedClientSecretNames, h) {
		return allowed, fmt.Errorf("helmSecretName %q is not allowed: the GitRepoRestrictions' allowedClientSecretNames allow %s", h, list(r.AllowedClientSecretNames))
	}
	if len(r.AllowedRepoPatterns) > 0 {
		ok, err := repoAllowed(gr.Spec.Repo, r.AllowedRepoPatterns)
		if err != nil {
			return allowed, err
		}
		if !ok {
			return allowed, fmt.Errorf("repo %q is not allowed: the GitRepoRestrictions allow %s (each a URL, or a pattern of the whole URL)", gr.Spec.Repo, list(r.AllowedRepoPatterns))
		}
	}
	return allowed, nil
}

// aggregate adds up restrictions: lists are joined; each default is the first set,
// in the order of the restrictions' names.
func aggregate(restrictions []*fleet.GitRepoRestriction) fleet.GitRepoRestriction {
	sorted := slices.Clone(restrictions)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out fleet.GitRepoRestriction
	for _, r := range sorted {
		if out.DefaultServiceAccount == "" {
			out.DefaultServiceAccount = r.DefaultServiceAccount
		}
		if out.DefaultClientSecretName == "" {
			out.DefaultClientSecretName = r.DefaultClientSecretName
		}
		out.AllowedServiceAccounts = append(out.AllowedServiceAccounts, r.AllowedServiceAccounts...)
		out.AllowedClientSecretNames = append(out.AllowedClientSecretNames, r.AllowedClientSecretNames...)
		out.AllowedRepoPatterns = append(out.AllowedRepoPatterns, r.AllowedRepoPatterns...)
		out.AllowedTargetNamespaces = append(out.AllowedTargetNamespaces, r.AllowedTargetNamespaces...)
		if r.AllowedTargetNamespaceSelector != nil {
			out.AllowedTargetNamespaceSelector = r.AllowedTargetNamespaceSelector
		}
	}
	return out
}

// repoAllowed says whether repo is one of patterns, or matches one of them whole.
func repoAllowed(repo string, patterns []string) (bool, error) {
	for _, p := range patterns {
		if p == repo {
			return true, nil
		}
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return false, fmt.Errorf("GitRepoRestriction allowedRepoPatterns: %q is not a regular expression: %w", p, err)
		}
		if re.MatchString(repo) {
			return true, nil
		}
	}
	return false, nil
}

func list(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// restrictionKey changes when the restrictions that apply change.
func restrictionKey(restrictions []*fleet.GitRepoRestriction) string {
	keys := make([]string, 0, len(restrictions))
	for _, r := range restrictions {
		keys = append(keys, r.Name+"@"+r.ResourceVersion)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
