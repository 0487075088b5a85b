package deployer

import (
	"testing"

	"github.com/rancher/wrangler/v3/pkg/summary"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIgnoredConditionsDoNotCountForReadiness(t *testing.T) {
	object := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": "w", "namespace": "ns"},
			"status": map[string]interface{}{"conditions": []interface{}{
				map[string]interface{}{"type": "Synced", "status": "True"},
				map[string]interface{}{"type": "Ready", "status": "False", "reason": "Flaky", "message": "upstream is slow"},
			}},
		}}
	}
	for _, tc := range []struct {
		name   string
		ignore []map[string]string
		ready  bool
	}{
		{"nothing ignored", nil, false},
		{"by type", []map[string]string{{"type": "Ready"}}, true},
		{"by type and status", []map[string]string{{"type": "Ready", "status": "False"}}, true},
		{"a field that differs", []map[string]string{{"type": "Ready", "status": "True"}}, false},
		{"an empty entry matches nothing", []map[string]string{{}}, false},
		{"another condition", []map[string]string{{"type": "Other"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := object()
			if got := summary.Summarize(withoutConditions(obj, tc.ignore)).IsReady(); got != tc.ready {
				t.Errorf("ready %v, want %v", got, tc.ready)
			}
			if len(obj.Object["status"].(map[string]interface{})["conditions"].([]interface{})) != 2 {
				t.Error("the object itself was changed")
			}
		})
	}
}
