package registration

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func policy(t *testing.T, hubUser, name string) string {
	t.Helper()
	policies, _, err := AdmissionPolicies(Admission{HubUser: hubUser, ClusterTokenTTL: 24 * time.Hour, ClusterRecoveryTTL: 90 * 24 * time.Hour})
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

// evalCEL compiles expr in env and evaluates it with vars.
func evalCEL(t *testing.T, env *cel.Env, expr string, vars map[string]any) any {
	t.Helper()
	ast, issues := env.Compile(expr)
	if issues.Err() != nil {
		t.Fatalf("%s: %v", expr, issues.Err())
	}
	program, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := program.Eval(vars)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return out.Value()
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
			for user, wantMatch := range map[string]bool{hub: false, hub + "x": true, "flotilla-admin": true} {
				if got := evalCEL(t, env, condition, map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": user}}}); got != wantMatch {
					t.Errorf("user %q: the policy applies = %v, want %v", user, got, wantMatch)
				}
			}
		})
	}
}

// A cluster identity's TokenRequests may last no longer than the hub's own lifetimes.
func TestTheAgentTokenPolicyBoundsLifetimes(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("object", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(t *testing.T, expr string, vars map[string]any) any { return evalCEL(t, env, expr, vars) }
	policyOf := func(t *testing.T, hub Admission) (variable, validation, message string) {
		policies, _, err := AdmissionPolicies(hub)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range policies {
			if *p.Name == "flotilla-agent-tokens" {
				return *p.Spec.Variables[0].Expression, *p.Spec.Validations[0].Expression, *p.Spec.Validations[0].MessageExpression
			}
		}
		t.Fatal("no policy flotilla-agent-tokens")
		return
	}
	for _, tc := range []struct {
		name    string
		hub     Admission
		sa      string
		seconds any
		allowed bool
		message string
	}{
		{"its own lifetime", Admission{ClusterTokenTTL: 2 * time.Hour, ClusterRecoveryTTL: 48 * time.Hour}, "fleet-agent", int64(7200), true, ""},
		{"a second longer", Admission{ClusterTokenTTL: 2 * time.Hour, ClusterRecoveryTTL: 48 * time.Hour}, "fleet-agent", int64(7201), false, "of at most 7200 seconds"},
		{"364 days", Admission{ClusterTokenTTL: 24 * time.Hour, ClusterRecoveryTTL: 90 * 24 * time.Hour}, "fleet-agent", int64(364 * 86400), false, "fleet-agent of at most 86400 seconds"},
		{"the recovery lifetime", Admission{ClusterTokenTTL: 2 * time.Hour, ClusterRecoveryTTL: 48 * time.Hour}, "fleet-agent-recovery", int64(172800), true, ""},
		{"past the recovery lifetime", Admission{ClusterTokenTTL: 2 * time.Hour, ClusterRecoveryTTL: 48 * time.Hour}, "fleet-agent-recovery", int64(172801), false, "fleet-agent-recovery of at most 172800 seconds"},
		{"recovery off", Admission{ClusterTokenTTL: 2 * time.Hour}, "fleet-agent-recovery", int64(600), false, "recovery is off"},
		{"no lifetime asked", Admission{ClusterTokenTTL: 2 * time.Hour}, "fleet-agent", nil, false, "of at most 7200 seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			variable, validation, message := policyOf(t, tc.hub)
			spec := map[string]any{}
			if tc.seconds != nil {
				spec["expirationSeconds"] = tc.seconds
			}
			vars := map[string]any{"request": map[string]any{"name": tc.sa}, "object": map[string]any{"spec": spec}}
			vars["variables"] = map[string]any{"most": eval(t, variable, vars)}
			if got := eval(t, validation, vars); got != tc.allowed {
				t.Fatalf("allowed = %v, want %v", got, tc.allowed)
			}
			if msg := eval(t, message, vars).(string); !tc.allowed && !strings.Contains(msg, tc.message) {
				t.Fatalf("message %q, want %q", msg, tc.message)
			}
		})
	}
}
