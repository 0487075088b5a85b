package request

import (
	"strings"
	"testing"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestDecideApproval(t *testing.T) {
	for _, tc := range []struct {
		name          string
		answer        string
		refusedBefore bool
		want          approval
		note          string
	}{
		{"no answer yet", "", false, approvalWait, ""},
		{"approved", names.ApprovalApproved, false, approvalGrant, ""},
		{"refused", names.ApprovalRefused, false, approvalRefuse, ""},
		{"refused before, no answer", "", true, approvalRefuse, ""},
		{"refused before, approved on a new request", names.ApprovalApproved, true, approvalRefuse, ""},
		{"an answer that is neither", "yes", false, approvalWait, `"yes" is neither`},
		{"an answer in other case", "Approved", false, approvalWait, "is neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := decideApproval(tc.answer, tc.refusedBefore)
			if got != tc.want {
				t.Fatalf("decideApproval(%q, %v) = %v, want %v", tc.answer, tc.refusedBefore, got, tc.want)
			}
			if tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
				t.Fatalf("note = %q, want one containing %q", note, tc.note)
			}
		})
	}
}
