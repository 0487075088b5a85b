package bundle

import (
	"fmt"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/target"
)

// reasonUnsupported is the Processed reason of a Bundle that sets a field Flotilla
// accepts (it is Fleet's) but does not do yet: refused rather than ignored, so that
// nothing deploys otherwise than its author wrote.
const reasonUnsupported = "Unsupported"

// unsupported names the fields of spec that Flotilla does not do yet, or returns nil.
func unsupported(spec *fleet.BundleSpec) error {
	var fields []string
	if spec.RolloutStrategy != nil {
		fields = append(fields, "spec.rolloutStrategy")
	}
	if len(spec.DependsOn) > 0 {
		fields = append(fields, "spec.dependsOn")
	}
	fields = append(fields, unsupportedOptions("spec", spec.BundleDeploymentOptions)...)
	for i, t := range spec.Targets {
		fields = append(fields, unsupportedOptions(fmt.Sprintf("spec.targets[%s]", target.TargetName(i, t.Name)), t.BundleDeploymentOptions)...)
	}
	if len(fields) == 0 {
		return nil
	}
	return fmt.Errorf("%s: not supported by Flotilla yet (see docs/bundles.md); remove it to deploy", strings.Join(fields, ", "))
}

func unsupportedOptions(at string, o fleet.BundleDeploymentOptions) []string {
	var fields []string
	if o.ServiceAccount != "" {
		fields = append(fields, at+".serviceAccount")
	}
	if len(o.IgnoreOptions.Conditions) > 0 {
		fields = append(fields, at+".ignore.conditions")
	}
	if o.CorrectDrift != nil && o.CorrectDrift.KeepFailHistory {
		fields = append(fields, at+".correctDrift.keepFailHistory")
	}
	return fields
}
