package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

func newKey(t testing.TB) (ed25519.PrivateKey, []byte) {
	t.Helper()
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pubPEM
}

func testBundle() *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "clusters"},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: "app",
				Helm:             &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"replicas": 1, "image": "app:1"}}},
			},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"}},
			Targets: []fleet.BundleTarget{
				{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"replicas": 2}}}}},
				{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
			},
		},
	}
}

// deployment is the BundleDeployment the hub makes of bundle for a cluster labelled
// env, as its bundle controller does: the matching target's options, the deployment
// ID they and the Content give, and the Bundle's signature.
func deployment(t *testing.T, bundle *fleet.Bundle, env string) *fleet.BundleDeployment {
	t.Helper()
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: bundle.Namespace, Labels: map[string]string{"env": env}}}
	targets, err := target.Clusters(bundle, []*fleet.Cluster{cluster}, nil)
	if err != nil || len(targets) != 1 {
		t.Fatalf("targets %v, %v", targets, err)
	}
	encoded, err := content.Encode(bundle.Spec.Resources)
	if err != nil {
		t.Fatal(err)
	}
	id, err := target.DeploymentID(encoded.Name, targets[0].Options)
	if err != nil {
		t.Fatal(err)
	}
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: bundle.Name, Namespace: "cluster-clusters-c", Labels: map[string]string{names.BundleNamespaceLabel: bundle.Namespace}},
		Spec:       fleet.BundleDeploymentSpec{Options: targets[0].Options, DeploymentID: id},
	}
	if sig, ok := bundle.Annotations[names.SignatureAnnotation]; ok {
		bd.Annotations = map[string]string{names.SignatureAnnotation: sig}
	}
	return bd
}

// editSignature changes bd's signature annotation as someone without the key would.
func editSignature(t *testing.T, bd *fleet.BundleDeployment, change func(*Signature)) {
	t.Helper()
	var sig Signature
	if err := json.Unmarshal([]byte(bd.Annotations[names.SignatureAnnotation]), &sig); err != nil {
		t.Fatal(err)
	}
	change(&sig)
	raw, err := json.Marshal(sig)
	if err != nil {
		t.Fatal(err)
	}
	bd.Annotations[names.SignatureAnnotation] = string(raw)
}

func TestVerify(t *testing.T) {
	key, pub := newKey(t)
	otherKey, _ := newKey(t)
	verifier, err := ParseTrustedKeys(pub)
	if err != nil || verifier == nil {
		t.Fatalf("ParseTrustedKeys: %v, %v", verifier, err)
	}
	signed := func(t *testing.T, key ed25519.PrivateKey) *fleet.Bundle {
		b := testBundle()
		if err := Sign(b, nil, key); err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name   string
		v      *Verifier
		bd     func(t *testing.T) *fleet.BundleDeployment
		reason string // "" for accepted
	}{
		{"signed, first target", verifier, func(t *testing.T) *fleet.BundleDeployment { return deployment(t, signed(t, key), "dev") }, ""},
		{"signed, second target", verifier, func(t *testing.T) *fleet.BundleDeployment { return deployment(t, signed(t, key), "prod") }, ""},
		{"unsigned", verifier, func(t *testing.T) *fleet.BundleDeployment { return deployment(t, testBundle(), "dev") }, ReasonUnsigned},
		{"signed by another key", verifier, func(t *testing.T) *fleet.BundleDeployment { return deployment(t, signed(t, otherKey), "dev") }, ReasonUntrustedKey},
		{"values changed after signing", verifier, func(t *testing.T) *fleet.BundleDeployment {
			b := signed(t, key)
			b.Spec.Helm.Values.Data["image"] = "evil:1"
			return deployment(t, b, "prod")
		}, ReasonNotSigned},
		{"a target customisation added after signing", verifier, func(t *testing.T) *fleet.BundleDeployment {
			b := signed(t, key)
			b.Spec.Targets[1].Helm = &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"image": "evil:1"}}}
			return deployment(t, b, "prod")
		}, ReasonNotSigned},
		{"resources changed after signing", verifier, func(t *testing.T) *fleet.BundleDeployment {
			b := signed(t, key)
			b.Spec.Resources[0].Content += "data:\n  evil: \"1\"\n"
			return deployment(t, b, "dev")
		}, ReasonNotSigned},
		{"options changed on the hub, deployment ID kept", verifier, func(t *testing.T) *fleet.BundleDeployment {
			bd := deployment(t, signed(t, key), "dev")
			bd.Spec.Options.DefaultNamespace = "kube-system"
			return bd
		}, ReasonNotSigned},
		{"signature of another Bundle", verifier, func(t *testing.T) *fleet.BundleDeployment {
			bd := deployment(t, signed(t, key), "dev")
			bd.Name = "other"
			return bd
		}, ReasonBadSignature},
		{"signature of the same Bundle in another workspace", verifier, func(t *testing.T) *fleet.BundleDeployment {
			bd := deployment(t, signed(t, key), "dev")
			bd.Labels[names.BundleNamespaceLabel] = "other-workspace"
			return bd
		}, ReasonBadSignature},
		{"a key that is no fingerprint", verifier, func(t *testing.T) *fleet.BundleDeployment {
			bd := deployment(t, signed(t, key), "dev")
			editSignature(t, bd, func(sig *Signature) { sig.Key = strings.Repeat("x", 10000) })
			return bd
		}, ReasonBadSignature},
		{"signed deployments edited", verifier, func(t *testing.T) *fleet.BundleDeployment {
			b := signed(t, key)
			b.Spec.Helm.Values.Data["image"] = "evil:1"
			bd := deployment(t, b, "prod")
			editSignature(t, bd, func(sig *Signature) { sig.Deployments = append(sig.Deployments, bd.Spec.DeploymentID) })
			return bd
		}, ReasonBadSignature},
		{"not JSON", verifier, func(t *testing.T) *fleet.BundleDeployment {
			bd := deployment(t, signed(t, key), "dev")
			bd.Annotations[names.SignatureAnnotation] = "{"
			return bd
		}, ReasonBadSignature},
		{"trusted keys unreadable", Refusing(errors.New("bad PEM")), func(t *testing.T) *fleet.BundleDeployment {
			return deployment(t, signed(t, key), "dev")
		}, ReasonInvalidTrustedKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Verify(tt.bd(t))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Reason != tt.reason {
				t.Fatalf("got %v, want a refusal with reason %s", err, tt.reason)
			}
			if len(refused.Message) > 500 {
				t.Fatalf("a message of %d bytes: what an attacker wrote is repeated", len(refused.Message))
			}
		})
	}
}

// A target that does not deploy signs nothing, and a Bundle with no target that
// deploys cannot be signed.
func TestDeployments(t *testing.T) {
	b := testBundle()
	all, err := Deployments(b, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("Deployments: %v, %v; want 2", all, err)
	}
	b.Spec.Targets[0].DoNotDeploy = true
	if one, err := Deployments(b, nil); err != nil || len(one) != 1 || one[0] != all[1] && one[0] != all[0] {
		t.Fatalf("with a doNotDeploy target: %v, %v", one, err)
	}
	b.Spec.Targets = nil
	if _, err := Deployments(b, nil); err == nil {
		t.Fatal("a Bundle without targets was signed")
	}
	b = testBundle()
	b.Spec.Resources, b.Spec.ContentsID = nil, "s-0000"
	if _, err := Deployments(b, nil); err == nil || !strings.Contains(err.Error(), "Content s-0000") {
		t.Fatalf("a Bundle naming a Content not given: %v", err)
	}
}

func TestParseTrustedKeys(t *testing.T) {
	_, pub1 := newKey(t)
	_, pub2 := newKey(t)
	privPEM, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})
	tests := []struct {
		name  string
		in    string
		keys  int // -1 for an error
		isNil bool
	}{
		{"empty: verification off", "  \n", 0, true},
		{"one key", string(pub1), 1, false},
		{"two keys", string(pub1) + string(pub2), 2, false},
		{"a private key", string(privPEM), -1, false},
		{"an RSA key", string(rsaPEM), -1, false},
		{"text after the keys", string(pub1) + "oops", -1, false},
		{"no PEM at all", "ssh-ed25519 AAAA", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseTrustedKeys([]byte(tt.in))
			switch {
			case tt.keys < 0:
				if err == nil {
					t.Fatalf("accepted, with keys %v", v.Keys())
				}
			case err != nil:
				t.Fatal(err)
			case tt.isNil != (v == nil):
				t.Fatalf("verifier %v, want nil %v", v, tt.isNil)
			case v != nil && len(v.Keys()) != tt.keys:
				t.Fatalf("keys %v, want %d", v.Keys(), tt.keys)
			}
		})
	}
}

// The signature annotation comes from whoever may write Bundles: reading it never
// panics, and only a real signature passes.
func FuzzVerify(f *testing.F) {
	key, pub := newKey(f)
	v, err := ParseTrustedKeys(pub)
	if err != nil {
		f.Fatal(err)
	}
	b := testBundle()
	if err := Sign(b, nil, key); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Annotations[names.SignatureAnnotation])
	f.Add(`{"key":"x","deployments":null,"signature":"!!"}`)
	f.Fuzz(func(t *testing.T, annotation string) {
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "other", Annotations: map[string]string{names.SignatureAnnotation: annotation}},
			Spec:       fleet.BundleDeploymentSpec{DeploymentID: "s-1:2"},
		}
		if err := v.Verify(bd); err == nil {
			t.Fatalf("accepted %q", annotation)
		}
	})
}
