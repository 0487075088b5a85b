package registration

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/admission.yaml
var admissionYAML []byte

// hubUsernamePlaceholder stands in manifests/admission.yaml for the hub's user name.
const hubUsernamePlaceholder = "HUB_USERNAME"

// AdmissionPolicies are the ValidatingAdmissionPolicies, with their bindings, that
// the API server applies to what outsiders send the hub (manifests/admission.yaml):
// a request must name the token it is made with, an agent may create only its own
// Lease and change only its heartbeat, only the hub makes agent bundles. hubUser is
// the user name the hub acts as. They are server-side apply configurations; the hub
// applies them on every start.
func AdmissionPolicies(hubUser string) ([]*admissionv1.ValidatingAdmissionPolicyApplyConfiguration, []*admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration, error) {
	var (
		policies []*admissionv1.ValidatingAdmissionPolicyApplyConfiguration
		bindings []*admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration
	)
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
			forHub(p, hubUser)
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

// forHub writes hubUser, as a CEL string, where p's expressions name the hub.
func forHub(p *admissionv1.ValidatingAdmissionPolicyApplyConfiguration, hubUser string) {
	if p.Spec == nil {
		return
	}
	// strconv.Quote's escapes are all CEL string escapes too.
	literal := strconv.Quote(hubUser)
	for i := range p.Spec.MatchConditions {
		if e := p.Spec.MatchConditions[i].Expression; e != nil {
			*e = strings.ReplaceAll(*e, hubUsernamePlaceholder, literal)
		}
	}
	for i := range p.Spec.Validations {
		if e := p.Spec.Validations[i].Expression; e != nil {
			*e = strings.ReplaceAll(*e, hubUsernamePlaceholder, literal)
		}
	}
}
