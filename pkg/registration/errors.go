package registration

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Explain turns an error from talking to the hub into a sentence a user can act on.
// what says what the agent was doing.
func Explain(what, hubURL string, err error) error {
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
