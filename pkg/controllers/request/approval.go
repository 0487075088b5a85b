package request

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// pendingByToken indexes the requests held for approval by "<namespace>/<token>" of
// the token they name.
const pendingByToken = "fleet.cattle.io/pending-by-registration-token"

const (
	// maxPendingPerToken is how many requests of one token may wait for approval at
	// once; more are refused, so a token holder cannot bury the ones an admin
	// expects among its own.
	maxPendingPerToken = 100
	// approvalRecheck is how often a held request is judged again: a token deleted
	// or expired meanwhile refuses it.
	approvalRecheck = 10 * time.Minute
	// maxRefusedClients is as many refused clientIDs as a token's status keeps (its
	// CRD's limit); the oldest are forgotten first.
	maxRefusedClients = 10000
	// reasonRefusedByAdmin is the reason of the Ready condition of a request a hub
	// admin refused, or of its cluster's later requests with the same token.
	reasonRefusedByAdmin = "RefusedByAdmin"
)

// approval is what becomes of a request for a new Cluster with a token that
// requires approval.
type approval int

const (
	approvalWait approval = iota
	approvalGrant
	approvalRefuse
)

// decideApproval decides a request for a new Cluster with a token that requires
// approval, from a hub admin's answer on it (its ApprovalAnnotation) and whether an
// admin refused its cluster with this token before. The note says what is wrong with
// an answer that is neither approved nor refused.
func decideApproval(answer string, refusedBefore bool) (decision approval, note string) {
	switch {
	case refusedBefore:
		return approvalRefuse, ""
	case answer == names.ApprovalApproved:
		return approvalGrant, ""
	case answer == names.ApprovalRefused:
		return approvalRefuse, ""
	case answer == "":
		return approvalWait, ""
	default:
		return approvalWait, fmt.Sprintf("annotation %s=%q is neither %q nor %q", names.ApprovalAnnotation, answer, names.ApprovalApproved, names.ApprovalRefused)
	}
}

// heldError says the hub holds a request for an admin's approval, with the name its
// Cluster will have and what the admin can do.
type heldError struct{ clusterName, message string }

func (e *heldError) Error() string { return e.message }

// judgeApproval decides a request for a new Cluster with a token that requires
// approval: nil when an admin approved it, a refusal when an admin refused it (or
// its cluster before, with this token, which it records on the token), or a
// *heldError while it waits.
func (h *handler) judgeApproval(k kind, req *fleet.ClusterRegistrationRequest, token *fleet.ClusterRegistrationToken) error {
	hash := names.ClientIDHash(req.Spec.ClientID)
	refusedBefore := slices.Contains(token.Status.RefusedClients, hash)
	decision, note := decideApproval(req.Annotations[names.ApprovalAnnotation], refusedBefore)
	clusterName := names.ClusterForClientID(req.Spec.ClientID)
	switch decision {
	case approvalGrant:
		return nil
	case approvalRefuse:
		if !refusedBefore {
			if err := h.recordRefusal(token, hash); err != nil {
				return err
			}
		}
		return refuse(reasonRefusedByAdmin, "a hub admin refused the registration of cluster %s/%s with token %s; it may not register with this token (a new token lets it ask again)",
			req.Namespace, clusterName, token.Name)
	}
	if !registration.AwaitingApproval(req) && h.pendingOfToken(k, req) >= maxPendingPerToken {
		return refuse("TooManyAwaitingApproval", "token %s/%s has %d clusters waiting for a hub admin's approval, the most it may; ask an admin to answer them (hub cluster pending)",
			req.Namespace, token.Name, maxPendingPerToken)
	}
	message := fmt.Sprintf("token %s/%s requires a hub admin's approval for a new cluster: hub cluster approve %s -n %s (or refuse)",
		req.Namespace, token.Name, clusterName, req.Namespace)
	if note != "" {
		message += "; " + note
	}
	return &heldError{clusterName: clusterName, message: message}
}

// pendingOfToken counts the requests in the cache held for approval that were made
// with req's token.
func (h *handler) pendingOfToken(k kind, req *fleet.ClusterRegistrationRequest) int {
	pending, err := k.store.byIndex(pendingByToken, req.Namespace+"/"+req.Labels[names.RegistrationTokenLabel])
	if err != nil {
		return 0
	}
	return len(pending)
}

// recordRefusal records on the token that an admin refused the cluster whose
// clientID hash is hash, written with the token's resourceVersion.
func (h *handler) recordRefusal(token *fleet.ClusterRegistrationToken, hash string) error {
	updated := token.DeepCopy()
	refused := updated.Status.RefusedClients
	if len(refused) >= maxRefusedClients {
		refused = refused[len(refused)-maxRefusedClients+1:]
	}
	updated.Status.RefusedClients = append(slices.Clone(refused), hash)
	if _, err := h.tokens.UpdateStatus(updated); err != nil {
		return fmt.Errorf("recording the refusal on token %s/%s: %w", token.Namespace, token.Name, err)
	}
	return nil
}

// hold answers req as held for approval: Ready Unknown, with the Cluster's name to
// approve, and deletes the requests of its clientID it supersedes. It looks at req
// again after approvalRecheck.
func (h *handler) hold(k kind, req *fleet.ClusterRegistrationRequest, held *heldError) (*fleet.ClusterRegistrationRequest, error) {
	if err := h.removeOlder(k, req, registration.AwaitingApproval); err != nil {
		return req, err
	}
	updated := req.DeepCopy()
	updated.Status.ClusterName = held.clusterName
	changed := conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionUnknown, registration.ReasonAwaitingApproval, held.message)
	if changed || req.Status.ClusterName != held.clusterName {
		first := !registration.AwaitingApproval(req)
		var err error
		if updated, err = k.store.updateStatus(updated); err != nil {
			return req, err
		}
		if first {
			metrics.Registrations.WithLabelValues("held", registration.ReasonAwaitingApproval).Inc()
			h.events.Event(k.store.object(updated), corev1.EventTypeNormal, registration.ReasonAwaitingApproval, held.message)
		}
	}
	k.store.enqueueAfter(req.Namespace, req.Name, approvalRecheck)
	return updated, nil
}
