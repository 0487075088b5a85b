package bundle

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestWithValues(t *testing.T) {
	data := map[string][]byte{"values.yaml": []byte(`{"replicas":2}`), "prod": []byte(`{"replicas":5}`)}
	hash, err := ValuesHash(data)
	if err != nil {
		t.Fatal(err)
	}
	bundle := func(h string) *fleet.Bundle {
		return &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ws"},
			Spec: fleet.BundleSpec{
				ValuesHash: h,
				Targets:    []fleet.BundleTarget{{Name: "prod"}, {Name: "dev", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{ReleaseName: "x"}}}},
			},
		}
	}
	secret := func(typ corev1.SecretType, d map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ws"}, Type: typ, Data: d}
	}
	cases := []struct {
		name   string
		bundle *fleet.Bundle
		secret *corev1.Secret
		reason string
	}{
		{"values inline", bundle(""), nil, ""},
		{"the Secret is missing", bundle(hash), nil, reasonValuesSecretNotFound},
		{"a Secret of another type", bundle(hash), secret(corev1.SecretTypeOpaque, data), reasonValuesSecretMismatch},
		{"other values", bundle(hash), secret(SecretTypeBundleValues, map[string][]byte{"values.yaml": []byte(`{"replicas":3}`)}), reasonValuesSecretMismatch},
		{"the values", bundle(hash), secret(SecretTypeBundleValues, data), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withValues(tc.bundle, tc.secret)
			if tc.reason != "" {
				var r *refusal
				if !errors.As(err, &r) || r.reason != tc.reason {
					t.Fatalf("error %v, want reason %s", err, tc.reason)
				}
				if strings.Contains(err.Error(), hash[:16]) {
					t.Errorf("the message %q gives away the hash", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.bundle.Spec.ValuesHash == "" {
				if got != tc.bundle {
					t.Error("a Bundle with inline values must be used as it is")
				}
				return
			}
			if got.Spec.Helm.Values.Data["replicas"] != int64(2) && got.Spec.Helm.Values.Data["replicas"] != float64(2) {
				t.Errorf("values %v", got.Spec.Helm.Values.Data)
			}
			if v := got.Spec.Targets[0].Helm.Values.Data["replicas"]; v != int64(5) && v != float64(5) {
				t.Errorf("target prod values %v", got.Spec.Targets[0].Helm.Values.Data)
			}
			if got.Spec.Targets[1].Helm.Values != nil || got.Spec.Targets[1].Helm.ReleaseName != "x" {
				t.Errorf("target dev %+v", got.Spec.Targets[1].Helm)
			}
			if tc.bundle.Spec.Helm != nil {
				t.Error("withValues changed its input")
			}
		})
	}
}
