package registration

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func policy(t *testing.T, hubUser, name string) string {
	t.Helper()
	policies, _, err := AdmissionPolicies(hubUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policies {
		if *p.Name != name {
			continue
		}
		var exprs []string
		for _, c := range p.Spec.MatchConditions {
			exprs = append(exprs, *c.Expression)
		}
		for _, v := range p.Spec.Validations {
			exprs = append(exprs, *v.Expression)
		}
		return strings.Join(exprs, "\n")
	}
	t.Fatalf("no admission policy %s", name)
	return ""
}

// The agent-status policy lists the fields an agent may not change; a field added to
// ClusterStatus and not to the policy would be the agent's to write.
func TestTheAgentStatusPolicyKeepsEveryHubField(t *testing.T) {
	exprs := policy(t, "hub", "flotilla-agent-status")
	status := reflect.TypeOf(fleet.ClusterStatus{})
	for i := 0; i < status.NumField(); i++ {
		name, _, _ := strings.Cut(status.Field(i).Tag.Get("json"), ",")
		if name == "agent" {
			if strings.Contains(exprs, ".?agent ==") {
				t.Errorf("the policy keeps status.agent, the agent's own field")
			}
			continue
		}
		want := "object.?status.?" + name + " == oldObject.?status.?" + name
		if !strings.Contains(exprs, want) {
			t.Errorf("the policy does not keep status.%s from the agent: want %q", name, want)
		}
	}
}

// The hub's user name is written into the agent-bundle policy as a CEL string: any
// name, quotes and backslashes included, must compile and match only itself.
func TestTheAgentBundlePolicyNamesTheHubExactly(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	for _, hub := range []string{
		"flotilla-hub",
		"system:serviceaccount:cattle-fleet-system:fleet-controller",
		`o'brien "the hub" \ HUB_USERNAME`,
		"line\nbreak\x00é",
	} {
		t.Run(hub, func(t *testing.T) {
			condition, _, _ := strings.Cut(policy(t, hub, "flotilla-agent-bundles"), "\n")
			ast, issues := env.Compile(condition)
			if issues.Err() != nil {
				t.Fatalf("%s: %v", condition, issues.Err())
			}
			program, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			for user, wantMatch := range map[string]bool{hub: false, hub + "x": true, "flotilla-admin": true} {
				out, _, err := program.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": user}}})
				if err != nil {
					t.Fatal(err)
				}
				if out.Value() != wantMatch {
					t.Errorf("user %q: the policy applies = %v, want %v", user, out.Value(), wantMatch)
				}
			}
		})
	}
}
