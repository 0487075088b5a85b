package request

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// kind is one of the two kinds of registration the hub answers with the same rules:
// Flotilla's ClusterRegistrationRequest, signed with the agent's key and answered
// sealed, and Fleet's ClusterRegistration, which Fleet's agent sends without a key
// and whose answer it reads in the clear. The handler works on a request's
// ClusterRegistrationRequest form; the kind reads and writes the object it came as.
type kind struct {
	// name is the kind's name, as events and answers give it.
	name string
	// unkeyed says requests of this kind carry no key: they are never verified and
	// never let into a Cluster bound to a key.
	unkeyed bool
	store   requestStore
}

// requestStore reads and writes the requests of one kind.
type requestStore interface {
	updateStatus(req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error)
	delete(namespace, name string, opts *metav1.DeleteOptions) error
	enqueueAfter(namespace, name string, after time.Duration)
	byIndex(index, key string) ([]*fleet.ClusterRegistrationRequest, error)
	get(namespace, name string) error
	synced() bool
	// object is req as its own kind, for events.
	object(req *fleet.ClusterRegistrationRequest) runtime.Object
}

// requestKind is the name of Flotilla's kind, and fleetKind Fleet's.
const (
	requestKind = "ClusterRegistrationRequest"
	fleetKind   = "ClusterRegistration"
)

// requestsStore stores ClusterRegistrationRequests.
type requestsStore struct {
	c fleetcontrollers.ClusterRegistrationRequestController
}

func (s requestsStore) updateStatus(req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error) {
	return s.c.UpdateStatus(req)
}

func (s requestsStore) delete(namespace, name string, opts *metav1.DeleteOptions) error {
	return s.c.Delete(namespace, name, opts)
}

func (s requestsStore) enqueueAfter(namespace, name string, after time.Duration) {
	s.c.EnqueueAfter(namespace, name, after)
}

func (s requestsStore) byIndex(index, key string) ([]*fleet.ClusterRegistrationRequest, error) {
	return s.c.Cache().GetByIndex(index, key)
}

func (s requestsStore) get(namespace, name string) error {
	_, err := s.c.Cache().Get(namespace, name)
	return err
}

func (s requestsStore) synced() bool { return s.c.Informer().HasSynced() }

func (s requestsStore) object(req *fleet.ClusterRegistrationRequest) runtime.Object { return req }

// registrations stores Fleet's ClusterRegistrations.
type registrations struct {
	c fleetcontrollers.ClusterRegistrationController
}

// asRequest is a ClusterRegistration in the form the handler works on: the same
// object, with no key.
func asRequest(r *fleet.ClusterRegistration) *fleet.ClusterRegistrationRequest {
	return &fleet.ClusterRegistrationRequest{
		ObjectMeta: r.ObjectMeta,
		Spec: fleet.ClusterRegistrationRequestSpec{
			ClientID: r.Spec.ClientID, ClientRandom: r.Spec.ClientRandom, ClusterLabels: r.Spec.ClusterLabels,
		},
		Status: r.Status,
	}
}

// asRegistration is req back as the ClusterRegistration it came as.
func asRegistration(req *fleet.ClusterRegistrationRequest) *fleet.ClusterRegistration {
	if req == nil {
		return nil
	}
	return &fleet.ClusterRegistration{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: fleetKind},
		ObjectMeta: req.ObjectMeta,
		Spec: fleet.ClusterRegistrationSpec{
			ClientID: req.Spec.ClientID, ClientRandom: req.Spec.ClientRandom, ClusterLabels: req.Spec.ClusterLabels,
		},
		Status: req.Status,
	}
}

func (s registrations) updateStatus(req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error) {
	updated, err := s.c.UpdateStatus(asRegistration(req))
	if err != nil {
		return req, err
	}
	return asRequest(updated), nil
}

func (s registrations) delete(namespace, name string, opts *metav1.DeleteOptions) error {
	return s.c.Delete(namespace, name, opts)
}

func (s registrations) enqueueAfter(namespace, name string, after time.Duration) {
	s.c.EnqueueAfter(namespace, name, after)
}

func (s registrations) byIndex(index, key string) ([]*fleet.ClusterRegistrationRequest, error) {
	found, err := s.c.Cache().GetByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]*fleet.ClusterRegistrationRequest, len(found))
	for i, r := range found {
		out[i] = asRequest(r)
	}
	return out, nil
}

func (s registrations) get(namespace, name string) error {
	_, err := s.c.Cache().Get(namespace, name)
	return err
}

func (s registrations) synced() bool { return s.c.Informer().HasSynced() }

func (s registrations) object(req *fleet.ClusterRegistrationRequest) runtime.Object {
	return asRegistration(req)
}

// answerName is the name of the Secret that answers req: Fleet's agent waits for the
// name Fleet gives it.
func (k kind) answerName(req *fleet.ClusterRegistrationRequest) string {
	if k.unkeyed {
		return names.FleetAnswerSecret(req.Spec.ClientID, req.Spec.ClientRandom)
	}
	return names.CredentialSecret(req.Spec.ClientID, req.Spec.ClientRandom)
}

// keyAnnotations are the annotations that bind a Cluster created for req to its key;
// none for a request without a key.
func (k kind) keyAnnotations(req *fleet.ClusterRegistrationRequest) map[string]string {
	if k.unkeyed {
		return nil
	}
	return recordFor(req).annotations()
}
