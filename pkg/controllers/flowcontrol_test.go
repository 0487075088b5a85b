package controllers

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestFlowControlIsApplied(t *testing.T) {
	kube := fake.NewClientset()
	for range 2 { // and applied again on the next start
		if err := ensureFlowControl(context.Background(), kube); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.FlowcontrolV1().PriorityLevelConfigurations().Get(context.Background(), "flotilla-registration", metav1.GetOptions{}); err != nil {
		t.Errorf("priority level: %v", err)
	}
	if _, err := kube.FlowcontrolV1().FlowSchemas().Get(context.Background(), "flotilla-registration", metav1.GetOptions{}); err != nil {
		t.Errorf("FlowSchema: %v", err)
	}
}

// Without the right to write them, or on an API server without the flowcontrol v1
// API, the hub goes on; any other failure stops it.
func TestFlowControlFailures(t *testing.T) {
	resource := schema.GroupResource{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}
	for name, c := range map[string]struct {
		err     error
		wantErr bool
	}{
		"forbidden":   {apierrors.NewForbidden(resource, "flotilla-registration", nil), false},
		"no such API": {apierrors.NewNotFound(resource, "flotilla-registration"), false},
		"unavailable": {apierrors.NewServiceUnavailable("etcd is down"), true},
	} {
		kube := fake.NewClientset()
		kube.PrependReactor("patch", "prioritylevelconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, c.err
		})
		if err := ensureFlowControl(context.Background(), kube); (err != nil) != c.wantErr {
			t.Errorf("%s: ensureFlowControl = %v, want an error: %v", name, err, c.wantErr)
		}
	}
}
