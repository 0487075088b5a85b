package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
)

// Condition is a wrangler condition (type, status, reason, message and times), the shape
// Fleet uses on every status, so `kubectl wait --for=condition=Ready` works on all kinds.
type Condition = genericcondition.GenericCondition

// Condition types set by the hub.
const (
	// ConditionReady is True when an object has reached the state its spec asks for.
	// On a Cluster it is Unknown when the agent has not been seen for too long.
	ConditionReady = "Ready"
	// ConditionImported is set on a Cluster with a kubeConfigSecret: True once the hub
	// has deployed the agent into the downstream cluster, False with a reason otherwise.
	ConditionImported = "Imported"
	// ConditionProcessed is True once the hub has handled the current generation.
	ConditionProcessed = "Processed"
	// ConditionRolledOut is set on a Bundle: True once every cluster it targets has its
	// current version (released to the agent, whether or not applied yet); False with
	// reason Waiting (the rollout strategy holds clusters back, the message says why)
	// or Paused.
	ConditionRolledOut = "RolledOut"
)

// Reasons of a Bundle's RolledOut condition.
const (
	// RolloutWaiting: the rollout strategy holds clusters back.
	RolloutWaiting = "Waiting"
	// RolloutPaused: paused clusters, and no others, keep an older version.
	RolloutPaused = "Paused"
)
