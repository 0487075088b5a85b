package registration

import (
	_ "embed"
	"fmt"

	flowcontrolv1 "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
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
// puts the requests of registering agents in it (manifests/flowschema.yaml), as
// server-side apply configurations. The hub applies them on every start.
func FlowControl() (*flowcontrolv1.PriorityLevelConfigurationApplyConfiguration, *flowcontrolv1.FlowSchemaApplyConfiguration, error) {
	level := &flowcontrolv1.PriorityLevelConfigurationApplyConfiguration{}
	if err := yaml.UnmarshalStrict(priorityLevelYAML, level); err != nil {
		return nil, nil, fmt.Errorf("manifests/prioritylevel.yaml: %w", err)
	}
	schema := &flowcontrolv1.FlowSchemaApplyConfiguration{}
	if err := yaml.UnmarshalStrict(flowSchemaYAML, schema); err != nil {
		return nil, nil, fmt.Errorf("manifests/flowschema.yaml: %w", err)
	}
	return level, schema, nil
}
