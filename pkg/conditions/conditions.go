// Package conditions reads and sets the conditions of fleet.cattle.io objects, keeping
// transition times right so `kubectl wait --for=condition=...` and humans can rely on them.
package conditions

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Get returns the condition of type t, or nil.
func Get(conds []fleet.Condition, t string) *fleet.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// IsTrue says whether the condition of type t is True.
func IsTrue(conds []fleet.Condition, t string) bool {
	c := Get(conds, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Set sets the condition of type t and reports whether anything changed. The
// transition time moves only when the status does; the update time when anything does.
func Set(conds *[]fleet.Condition, t string, status corev1.ConditionStatus, reason, message string) bool {
	now := time.Now().UTC().Format(time.RFC3339)
	c := Get(*conds, t)
	if c == nil {
		*conds = append(*conds, fleet.Condition{
			Type: t, Status: status, Reason: reason, Message: message, LastUpdateTime: now, LastTransitionTime: now,
		})
		return true
	}
	if c.Status == status && c.Reason == reason && c.Message == message {
		return false
	}
	if c.Status != status {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, message, now
	return true
}
