package controlplane

import (
	"slices"
	"testing"
)

func TestReplaceFlags(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		flags, overrides, want []string
	}{
		{"replaced in place of the old value", []string{"--a=1", "--b=2"}, []string{"--b=3"}, []string{"--a=1", "--b=3"}},
		{"added", []string{"--a=1"}, []string{"--c=3"}, []string{"--a=1", "--c=3"}},
		{"a prefix is another flag", []string{"--authorization-mode=RBAC", "--authorization-webhook=x"}, []string{"--authorization-mode=Node,RBAC"},
			[]string{"--authorization-webhook=x", "--authorization-mode=Node,RBAC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replaceFlags(tc.flags, tc.overrides); !slices.Equal(got, tc.want) {
				t.Errorf("replaceFlags = %v, want %v", got, tc.want)
			}
		})
	}
}
