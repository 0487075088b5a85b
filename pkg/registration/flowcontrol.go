package registration

import (
	_ "embed"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed manifests/prioritylevel.yaml
	priorityLevelYAML []byte
	//go:embed manifests/flowschema.yaml
	flowSchemaYAML []byte
)

// FlowControl is the API priority and fairness configuration of registration traffic:
// a PriorityLevelConfiguration (manifests/prioritylevel.yaml), and the FlowSchema that
// puts the requests of registering agents in it (manifests/flowschema.yaml). The hub
// keeps them in place on every start.
func FlowControl() (*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.FlowSchema, error) {
	level := &flowcontrolv1.PriorityLevelConfiguration{}
	if err := yaml.UnmarshalStrict(priorityLevelYAML, level); err != nil {
		return nil, nil, fmt.Errorf("manifests/prioritylevel.yaml: %w", err)
	}
	schema := &flowcontrolv1.FlowSchema{}
	if err := yaml.UnmarshalStrict(flowSchemaYAML, schema); err != nil {
		return nil, nil, fmt.Errorf("manifests/flowschema.yaml: %w", err)
	}
	return level, schema, nil
}
