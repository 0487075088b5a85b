package registration

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// explained is an error rewritten for users that still unwraps to its cause, so
// callers can test it with apierrors.IsUnauthorized and the like.
type explained struct {
	message string
	cause   error
}

func (e *explained) Error() string { return e.message }
func (e *explained) Unwrap() error { return e.cause }

// Explain turns an error from talking to the hub into a sentence a user can act on.
// what says what the agent was doing.
func Explain(what, hubURL string, err error) error {
	if err == nil {
		return nil
	}
	return &explained{message: explain(what, hubURL, err).Error(), cause: err}
}

func explain(what, hubURL string, err error) error {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the hub at %s refused the credential (401 Unauthorized): it has expired or was revoked", what, hubURL)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: the hub at %s forbids it (403): %v", what, hubURL, apierrors.ReasonForError(err))
	case errors.As(err, &unknownAuthority):
		return fmt.Errorf("%s: the hub's certificate at %s is not signed by the apiServerCA this agent was given (wrong or missing apiServerCA?): %w", what, hubURL, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%s: the hub's certificate does not name the host of apiServerURL %s (start the hub with --tls-san for it): %w", what, hubURL, err)
	case errors.As(err, &certInvalid):
		return fmt.Errorf("%s: the hub's certificate at %s is invalid: %w", what, hubURL, err)
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return fmt.Errorf("%s: cannot reach the hub at %s: %w", what, hubURL, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
