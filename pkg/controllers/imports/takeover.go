package imports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/render"
)

// Marks on the objects of Fleet's agent in a cluster Fleet imported: Fleet's import
// applies them as a wrangler object set, then its agent bundle's Helm release,
// fleet-agent-<cluster>, adopts them.
const (
	objectSetAnnotation     = "objectset.rio.cattle.io/id"
	releaseNameAnnotation   = "meta.helm.sh/release-name"
	releaseSpaceAnnotation  = "meta.helm.sh/release-namespace"
	fleetAgentReleasePrefix = "fleet-agent-"
)

// existingObject is an object the agent chart would create that the downstream
// cluster already has.
type existingObject struct {
	kind, namespace, name string
	annotations           map[string]string
}

func (o existingObject) String() string {
	if o.namespace == "" {
		return o.kind + " " + o.name
	}
	return o.kind + " " + o.namespace + "/" + o.name
}

// takeover is what installing the agent chart over Fleet's agent takes.
type takeover struct {
	// fleetReleases are Fleet's agent releases in the agent namespace, to uninstall
	// first: they would otherwise keep Fleet's agent running, and take the objects
	// back at their next upgrade.
	fleetReleases []string
	// adopt has the install take over the existing objects: only when every one of
	// them is Fleet's agent's (or left by an earlier install of the hub's own).
	adopt bool
	// fleets are the existing objects that are Fleet's, for the log.
	fleets []string
}

// String says what the takeover did, for an event.
func (t takeover) String() string {
	s := "Replaced Fleet's agent"
	if len(t.fleetReleases) > 0 {
		s += ": removed its release " + strings.Join(t.fleetReleases, ", ") + ";"
	}
	return s + " took over " + strings.Join(t.fleets, ", ")
}

// fleetsObject says whether o belongs to Fleet's agent: applied by Fleet's import, or
// managed by a fleet-agent-<cluster> release in the agent namespace.
func fleetsObject(o existingObject, namespace string) (release string, ok bool) {
	name := o.annotations[releaseNameAnnotation]
	if strings.HasPrefix(name, fleetAgentReleasePrefix) && o.annotations[releaseSpaceAnnotation] == namespace {
		return name, true
	}
	return "", o.annotations[objectSetAnnotation] != ""
}

// hubsOwnObject says whether o was made by the hub's own agent release.
func hubsOwnObject(o existingObject, namespace string) bool {
	return o.annotations[releaseNameAnnotation] == names.AgentRelease && o.annotations[releaseSpaceAnnotation] == namespace
}

// decideTakeover decides, from the objects in the way of the agent chart in
// namespace, what installing it takes. An object that is neither Fleet's nor the
// hub's own (a user's, another tool's) is never adopted, and Fleet's agent is then
// left running: Helm's refusal names what is in the way.
// Each object decides by its own marks, so an attempt cut short halfway (Fleet's
// release gone, some of its objects left) decides the same when it is retried.
func decideTakeover(existing []existingObject, namespace string) takeover {
	var out takeover
	foreign := false
	for _, o := range existing {
		release, fleets := fleetsObject(o, namespace)
		switch {
		case fleets:
			out.fleets = append(out.fleets, o.String())
			if release != "" && !slices.Contains(out.fleetReleases, release) {
				out.fleetReleases = append(out.fleetReleases, release)
			}
		case !hubsOwnObject(o, namespace):
			foreign = true
		}
	}
	if foreign {
		// Fleet's agent stays until the install can go ahead.
		return takeover{}
	}
	slices.Sort(out.fleetReleases)
	out.adopt = len(out.fleets) > 0
	return out
}

// inTheWay lists the objects of the agent chart, rendered with values, that the
// downstream cluster already has.
func inTheWay(ctx context.Context, actionConfig *action.Configuration, agent *chart.Chart, values map[string]interface{}, namespace string) ([]existingObject, error) {
	manifest, err := render.Template(ctx, &render.Release{Chart: agent, Values: values}, namespace, names.AgentRelease)
	if err != nil {
		return nil, fmt.Errorf("rendering the agent chart: %w", err)
	}
	resources, err := actionConfig.KubeClient.Build(bytes.NewBufferString(manifest), false)
	if err != nil {
		return nil, fmt.Errorf("reading the agent chart's objects: %w", err)
	}
	var out []existingObject
	err = resources.Visit(func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading %s %s: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
		}
		m, err := meta.Accessor(live)
		if err != nil {
			return err
		}
		out = append(out, existingObject{kind: info.Mapping.GroupVersionKind.Kind, namespace: info.Namespace, name: info.Name, annotations: m.GetAnnotations()})
		return nil
	})
	return out, err
}

// removeFleetsAgent uninstalls the releases of Fleet's agent that t names. One
// already gone (Fleet's agent may remove it itself) is not an error.
func removeFleetsAgent(actionConfig *action.Configuration, t takeover, namespace, secret string, log logrus.FieldLogger) error {
	for _, release := range t.fleetReleases {
		uninstall := action.NewUninstall(actionConfig)
		uninstall.Timeout = helmTimeout
		_, err := uninstall.Run(release)
		switch {
		case err == nil:
			log.WithField("release", release).Info("Removed Fleet's agent release")
		case !errors.Is(err, driver.ErrReleaseNotFound):
			return fail(ReasonHelmFailed, "removing Fleet's agent release %s/%s with kubeconfig Secret %s: %v", namespace, release, secret, err)
		}
	}
	return nil
}
