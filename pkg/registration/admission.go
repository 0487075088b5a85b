package registration

import (
	_ "embed"
	"fmt"
	"strings"

	admissionv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/admission.yaml
var admissionYAML []byte

// AdmissionPolicies are the ValidatingAdmissionPolicies, with their bindings, that
// the API server applies to registration traffic (manifests/admission.yaml): a
// request must name the token it is made with, and an agent may create only its own
// Lease. They are server-side apply configurations; the hub applies them on every
// start.
func AdmissionPolicies() ([]*admissionv1.ValidatingAdmissionPolicyApplyConfiguration, []*admissionv1.ValidatingAdmissionPolicyBindingApplyConfiguration, error) {
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
