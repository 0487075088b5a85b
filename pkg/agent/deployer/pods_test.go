package deployer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPodProblem(t *testing.T) {
	waiting := func(name, reason, message string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}}}
	}
	unschedulable := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}}}
	crashed := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}}}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"an image the node cannot get", []corev1.Pod{waiting("hello-a", "ErrImageNeverPull", `Container image "x:1" is not present`)},
			`Pod hello-a: ErrImageNeverPull: Container image "x:1" is not present`},
		{"the first Pod by name", []corev1.Pod{waiting("b", "CrashLoopBackOff", "back-off"), waiting("a", "ImagePullBackOff", "pulling")},
			"Pod a: ImagePullBackOff: pulling"},
		{"starting containers are no problem", []corev1.Pod{waiting("a", "ContainerCreating", ""), waiting("b", "PodInitializing", "")}, ""},
		{"a Pod that fits no node", []corev1.Pod{unschedulable}, "Pod big: Unschedulable: 0/1 nodes are available: 1 Insufficient memory."},
		{"a container that exited with an error", []corev1.Pod{crashed}, "Pod crash: Error: container app exited with 2"},
		{"no Pods", nil, ""},
		{"a long message is cut", []corev1.Pod{waiting("a", "ErrImagePull", strings.Repeat("x", 1000))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podProblem(tc.pods)
			if tc.name == "a long message is cut" {
				if len(got) > maxProblemLength+3 || !strings.HasPrefix(got, "Pod a: ErrImagePull: xxx") {
					t.Errorf("podProblem = %q (%d bytes)", got, len(got))
				}
				return
			}
			if got != tc.want {
				t.Errorf("podProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWorkloadPods(t *testing.T) {
	obj := func(apiVersion, kind string, selector map[string]interface{}) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]interface{}{"name": "x", "namespace": "ns"}}}
		if selector != nil {
			u.Object["spec"] = map[string]interface{}{"selector": selector}
		}
		return u
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"a Deployment", obj("apps/v1", "Deployment", map[string]interface{}{"matchLabels": map[string]interface{}{"app": "hello"}}), "app=hello"},
		{"a Job with expressions", obj("batch/v1", "Job", map[string]interface{}{"matchExpressions": []interface{}{
			map[string]interface{}{"key": "tier", "operator": "In", "values": []interface{}{"web"}}}}), "tier in (web)"},
		{"a Service is no workload", obj("v1", "Service", map[string]interface{}{"matchLabels": map[string]interface{}{"app": "hello"}}), ""},
		{"no selector", obj("apps/v1", "Deployment", nil), ""},
		{"an empty selector selects nothing here", obj("apps/v1", "DaemonSet", map[string]interface{}{}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			of, ok := workloadPods(tc.obj)
			got := ""
			if ok {
				got = of.selector.String()
				if of.namespace != "ns" {
					t.Errorf("namespace %q", of.namespace)
				}
			}
			if got != tc.want {
				t.Errorf("selector %q, want %q", got, tc.want)
			}
		})
	}
}
