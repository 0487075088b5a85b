package crds

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestEmbeddedCRDsAreTheFleetKinds(t *testing.T) {
	crds, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Bundle": "Namespaced", "BundleDeployment": "Namespaced", "Cluster": "Namespaced",
		"ClusterGroup": "Namespaced", "ClusterRegistration": "Namespaced", "ClusterRegistrationRequest": "Namespaced",
		"ClusterRegistrationToken": "Namespaced", "Content": "Cluster", "Policy": "Namespaced", "GitRepo": "Namespaced", "GitRepoRestriction": "Namespaced",
	}
	// Kinds without a status, whose objects are only read.
	statusless := map[string]bool{"Policy": true}
	if len(crds) != len(want) {
		t.Fatalf("%d CRDs embedded, want %d", len(crds), len(want))
	}
	for _, crd := range crds {
		scope, ok := want[crd.Spec.Names.Kind]
		if !ok {
			t.Errorf("unexpected kind %s", crd.Spec.Names.Kind)
			continue
		}
		if string(crd.Spec.Scope) != scope {
			t.Errorf("%s is %s, want %s", crd.Name, crd.Spec.Scope, scope)
		}
		if crd.Spec.Group != "fleet.cattle.io" || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
			t.Errorf("%s: not fleet.cattle.io/v1alpha1", crd.Name)
		}
		if !statusless[crd.Spec.Names.Kind] && (crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil) {
			t.Errorf("%s has no status subresource", crd.Name)
		}
	}
}

// The API server checks a token's ttl with a CEL regular expression; it must accept
// exactly what Go's time.ParseDuration (and so the hub) accepts.
func TestTTLRuleAgreesWithParseDuration(t *testing.T) {
	crds, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var rule string
	for _, crd := range crds {
		if crd.Spec.Names.Kind == "ClusterRegistrationToken" {
			ttl := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["ttl"]
			if len(ttl.XValidations) != 1 {
				t.Fatalf("spec.ttl has %d validation rules, want 1", len(ttl.XValidations))
			}
			rule = ttl.XValidations[0].Rule
		}
	}
	const prefix, suffix = "self.matches('", "')"
	if !strings.HasPrefix(rule, prefix) || !strings.HasSuffix(rule, suffix) {
		t.Fatalf("unexpected rule %q", rule)
	}
	// CEL's single-quoted string turns `\\` into `\`; CEL and Go both use RE2.
	re := regexp.MustCompile(strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(rule, prefix), suffix), `\\`, `\`))

	for _, s := range []string{
		"240h", "90m", "1h30m", "0", "-1s", "+5m", "2.5h", ".5h", "5.h", "300ms", "1us", "1µs", "1μs", "10ns",
		"1h2m3s4ms5us6ns", "forever", "1d", "h", "10", "5m3", "", "00", "-", "1 h", "1H", "0.0", "1e3s", "--1s",
	} {
		_, parseErr := time.ParseDuration(s)
		if matched := re.MatchString(s); matched != (parseErr == nil) {
			t.Errorf("%q: rule accepts=%v, time.ParseDuration accepts=%v", s, matched, parseErr == nil)
		}
	}
}
