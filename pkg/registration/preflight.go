package registration

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
)

// Problem is what a preflight check found wrong, with what to do about it.
type Problem struct {
	// Check names the check: config, rbac, proxy, reachable, ca, clock, token or
	// identity.
	Check   string
	Message string
}

// String is the problem as the agent logs and prints it: one PREFLIGHT line.
func (p Problem) String() string { return "PREFLIGHT " + p.Check + ": " + p.Message }

// maxPreflightSkew is how far preflight lets the downstream clock be from the
// hub's: the hub's certificates are valid from certBackdate before their issue.
const maxPreflightSkew = certBackdate

// preflightTimeout bounds each connection a check makes.
const preflightTimeout = 10 * time.Second

// Preflight checks what the agent of d needs to register and run, as far as it can
// see from the downstream cluster: its rights there, its registration values or
// identity, the way to the hub (proxy, address, CA), the clocks, and the token or
// identity it would use. It returns one Problem per thing wrong; none when all is
// well. It changes nothing, here or on the hub.
func Preflight(ctx context.Context, d Downstream) []Problem {
	p := &preflight{d: d, now: time.Now}
	p.run(ctx)
	return p.problems
}

type preflight struct {
	d        Downstream
	now      func() time.Time
	problems []Problem
}

func (p *preflight) add(check, format string, args ...any) {
	p.problems = append(p.problems, Problem{Check: check, Message: fmt.Sprintf(format, args...)})
}

func (p *preflight) run(ctx context.Context) {
	p.downstreamRights(ctx)
	values, err := p.d.Bootstrap(ctx)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	if values != nil {
		if err := values.Validate(); err != nil {
			p.add("config", "Secret %s/%s: %v; install the chart with the values.yaml of a ClusterRegistrationToken, unchanged", p.d.Namespace, names.AgentBootstrapSecret, err)
			return
		}
		ca, err := DecodeCA(values.APIServerCA)
		if err != nil {
			p.add("config", "apiServerCA of Secret %s/%s: %v", p.d.Namespace, names.AgentBootstrapSecret, err)
			return
		}
		if p.hub(ctx, values.APIServerURL, ca) {
			p.token(ctx, *values)
		}
		return
	}
	cred, err := p.d.Identity(ctx)
	switch {
	case err != nil:
		p.add("config", "%v", err)
	case cred == nil:
		p.add("config", "there is neither a bootstrap Secret %s/%s nor an identity (Secret %s/%s): install the fleet-agent chart with a ClusterRegistrationToken's values.yaml",
			p.d.Namespace, names.AgentBootstrapSecret, p.d.Namespace, names.AgentIdentitySecret)
	case p.hub(ctx, cred.APIServerURL, cred.APIServerCA):
		p.identity(ctx, *cred)
	}
}

// downstreamRights checks that the agent's credentials in the downstream cluster
// allow what it does there.
func (p *preflight) downstreamRights(ctx context.Context) {
	for _, need := range []struct {
		verb, group, resource, namespace, why string
	}{
		{"get", "", "secrets", p.d.Namespace, "read its registration values and identity"},
		{"update", "", "secrets", p.d.Namespace, "store its identity"},
		{"delete", "", "secrets", p.d.Namespace, "forget the registration token once registered"},
		{"get", "", "configmaps", p.d.Namespace, "read its settings"},
		{"*", "*", "*", "", "install Bundles, whose resources may be of any kind in any namespace"},
	} {
		review, err := p.d.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: need.namespace, Verb: need.verb, Group: need.group, Resource: need.resource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			p.add("rbac", "cannot ask the downstream API server what the agent may do: %v", err)
			return
		}
		if !review.Status.Allowed {
			where := "in every namespace"
			if need.namespace != "" {
				where = "in namespace " + need.namespace
			}
			p.add("rbac", "the agent's downstream credentials may not %s %s %s, which it needs to %s; the fleet-agent chart binds its ServiceAccount to cluster-admin",
				need.verb, need.resource, where, need.why)
		}
	}
}

// hub checks the way to the hub at hubURL, trusting caPEM (the system's roots when
// empty): the proxy, if one is used, the connection and the hub's certificate, and
// the clocks. It says whether the hub answered.
func (p *preflight) hub(ctx context.Context, hubURL string, caPEM []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hubURL+"/version", nil)
	if err != nil {
		p.add("config", "apiServerURL %q: %v", hubURL, err)
		return false
	}
	proxy := p.d.HubProxy.Func()
	proxyURL, err := proxy(req)
	if err != nil {
		p.add("proxy", "choosing the proxy for %s: %v", hubURL, err)
		return false
	}
	if proxyURL != nil {
		conn, err := (&net.Dialer{Timeout: preflightTimeout}).DialContext(ctx, "tcp", proxyAddress(proxyURL))
		if err != nil {
			p.add("proxy", "cannot connect to the proxy %s the agent uses for the hub: %v; check --hub-proxy (the chart's proxy value) or HTTPS_PROXY", redactProxy(proxyURL.String()), err)
			return false
		}
		conn.Close()
	}
	client, err := rest.HTTPClientFor(&rest.Config{Host: hubURL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, Proxy: proxy, Timeout: preflightTimeout})
	if err != nil {
		p.add("ca", "apiServerCA: %v", err)
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case isCertificateError(err):
			p.add("ca", "%v", explain("connecting to the hub", hubURL, err))
		case proxyURL != nil:
			p.add("proxy", "the hub at %s is not reachable through the proxy %s: %v; the proxy must allow CONNECT to the hub's host and port, or list the hub in --hub-no-proxy",
				hubURL, redactProxy(proxyURL.String()), err)
		default:
			p.add("reachable", "cannot reach the hub at %s: %v; check apiServerURL, DNS and the network from this cluster to the hub", hubURL, err)
		}
		return false
	}
	resp.Body.Close()
	if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		p.clock(p.now().Sub(date))
	}
	return true
}

// clock checks skew, how far this cluster's clock is ahead of the hub's.
func (p *preflight) clock(skew time.Duration) {
	if skew <= maxPreflightSkew && skew >= -maxPreflightSkew {
		return
	}
	side := "ahead of"
	if skew < 0 {
		side, skew = "behind", -skew
	}
	p.add("clock", "this cluster's clock is %s %s the hub's; the hub's certificates and tokens are valid from %s before their issue, so the agent's credentials would be refused or expire early: set the clocks right (NTP)",
		skew.Round(time.Second), side, maxPreflightSkew)
}

// token checks the registration token of values: that the hub accepts it, that it
// is the token the values name, and, where the hub lets a token read itself, that it
// has neither expired nor been used up, nor refused for this cluster.
func (p *preflight) token(ctx context.Context, values Values) {
	cfg, err := p.d.hubConfig(values.APIServerURL, values.APIServerCA, values.Token)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	tokenRef := values.ClusterNamespace + "/" + values.TokenName
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case apierrors.IsUnauthorized(err):
		p.add("token", "the hub does not accept the registration token (401 Unauthorized): ClusterRegistrationToken %s has expired or was deleted; create another (hub token create) and install the chart with its values.yaml", tokenRef)
		return
	case err != nil:
		p.add("token", "%v", Explain("checking the registration token", values.APIServerURL, err))
		return
	}
	want := serviceaccount.MakeUsername(values.ClusterNamespace, names.TokenServiceAccount(values.TokenName))
	if got := review.Status.UserInfo.Username; got != want {
		p.add("token", "the token in the values is %s, not ClusterRegistrationToken %s (%s): take the values.yaml whole from one token's Secret", got, tokenRef, want)
		return
	}
	fleetClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	token, err := fleetClient.FleetV1alpha1().ClusterRegistrationTokens(values.ClusterNamespace).Get(ctx, values.TokenName, metav1.GetOptions{})
	if err != nil {
		// A hub that does not let tokens read themselves: the answer to the request
		// will say.
		return
	}
	if exp := token.Status.Expires; exp != nil && exp.Time.Before(p.now()) {
		p.add("token", "ClusterRegistrationToken %s expired at %s; create another (hub token create)", tokenRef, exp.UTC().Format(time.RFC3339))
	}
	settings, err := p.d.Settings(ctx)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	clientID, err := p.d.ClientID(ctx, settings)
	if err != nil {
		p.add("config", "%v", err)
		return
	}
	hash := names.ClientIDHash(clientID)
	if slices.Contains(token.Status.RefusedClients, hash) {
		p.add("token", "a hub admin refused this cluster's registration with ClusterRegistrationToken %s; it may not register with that token", tokenRef)
	}
	registered := token.Status.RegisteredClients
	if limit := token.Spec.MaxRegistrations; limit != nil && len(registered) >= int(*limit) && !slices.Contains(registered, hash) {
		p.add("token", "ClusterRegistrationToken %s has registered the %d clusters its maxRegistrations allows, and this cluster is not one of them: create another token", tokenRef, *limit)
	}
}

// identity checks that the hub accepts the cluster's stored identity cred.
func (p *preflight) identity(ctx context.Context, cred Credential) {
	if cred.Expired(p.now()) {
		if !cred.CanRecover(p.now()) {
			p.add("identity", "%s", cred.ExpiredAdvice())
		}
		return
	}
	cfg, _, err := p.d.HubClient(ctx, cred)
	if err != nil {
		p.add("identity", "%v", err)
		return
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		p.add("identity", "%v", err)
		return
	}
	if _, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		p.add("identity", "%v", Explain("checking the cluster's identity "+cred.ClusterNamespace+"/"+cred.ClusterName, cred.APIServerURL, err))
	}
}

// isCertificateError says whether err is the hub's certificate failing
// verification.
func isCertificateError(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &certInvalid)
}

// proxyAddress is the host:port of proxy, with its scheme's default port.
func proxyAddress(proxy *url.URL) string {
	if proxy.Port() != "" {
		return proxy.Host
	}
	port := "80"
	switch proxy.Scheme {
	case "https":
		port = "443"
	case "socks5", "socks5h":
		port = "1080"
	}
	return net.JoinHostPort(proxy.Hostname(), port)
}
