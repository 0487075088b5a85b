package registration

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/admission.yaml
var admissionYAML []byte

// Admission is what the admission policies say of the hub: the user name it acts as,
// and the lifetimes it gives cluster identities' tokens.
type Admission struct {
	HubUser                             string
	ClusterTokenTTL, ClusterRecoveryTTL time.Duration
}

// AdmissionPolicies are the ValidatingAdmissionPolicies, with their bindings, that
// the API server applies to what outsiders send the hub (manifests/admission.yaml):
// a request must name the token it is made with, an agent may create only its own
// Lease, change only its heartbeat and mint tokens no longer than the hub's, only the
// hub makes agent bundles. They are server-side apply configurations; the hub
// applies them on every start.
func AdmissionPolicies(hub Admission) ([]*admissionv1.ValidatingAdmissionPolicyApplyConfiguration, []*admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration, error) {
	var (
		policies []*admissionv1.ValidatingAdmissionPolicyApplyConfiguration
		bindings []*admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration
	)
	// The placeholders manifests/admission.yaml holds; strconv.Quote's escapes are
	// all CEL string escapes too.
	placeholders := strings.NewReplacer(
		"HUB_USERNAME", strconv.Quote(hub.HubUser),
		"CLUSTER_TOKEN_SECONDS", strconv.FormatInt(int64(hub.ClusterTokenTTL/time.Second), 10),
		"CLUSTER_RECOVERY_SECONDS", strconv.FormatInt(int64(hub.ClusterRecoveryTTL/time.Second), 10))
	for i, doc := range strings.Split(string(admissionYAML), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return nil, nil, fmt.Errorf("manifests/admission.yaml document %d: %w", i, err)
		}
		switch kind.Kind {
		case "":
			continue
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicyApplyConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
				return nil, nil, fmt.Errorf("manifests/admission.yaml document %d: %w", i, err)
			}
			fill(p, placeholders)
			policies = append(policies, p)
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
				return nil, nil, fmt.Errorf("manifests/admission.yaml document %d: %w", i, err)
			}
			bindings = append(bindings, b)
		default:
			return nil, nil, fmt.Errorf("manifests/admission.yaml document %d: unexpected kind %s", i, kind.Kind)
		}
	}
	return policies, bindings, nil
}

// fill replaces the placeholders in every expression of p; replacing in expressions
// only, after parsing, keeps a value from changing the YAML's structure.
func fill(p *admissionv1.ValidatingAdmissionPolicyApplyConfiguration, placeholders *strings.Replacer) {
	if p.Spec == nil {
		return
	}
	replace := func(e *string) {
		if e != nil {
			*e = placeholders.Replace(*e)
		}
	}
	for i := range p.Spec.MatchConditions {
		replace(p.Spec.MatchConditions[i].Expression)
	}
	for i := range p.Spec.Variables {
		replace(p.Spec.Variables[i].Expression)
	}
	for i := range p.Spec.Validations {
		replace(p.Spec.Validations[i].Expression)
		replace(p.Spec.Validations[i].MessageExpression)
	}
}
