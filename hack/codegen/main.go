// Command codegen writes the generated Go code of the fleet.cattle.io API: deepcopy,
// list types and registration, a typed clientset and wrangler controllers (clients,
// caches and handlers) under pkg/generated. `make generate` runs it, then controller-gen
// for the CRD manifests.
package main

import (
	controllergen "github.com/rancher/wrangler/v3/pkg/controller-gen"
	"github.com/rancher/wrangler/v3/pkg/controller-gen/args"
)

func main() {
	controllergen.Run(args.Options{
		OutputPackage: "github.com/flotilla/flotilla/pkg/generated",
		Boilerplate:   "hack/boilerplate.go.txt",
		Groups: map[string]args.Group{
			"fleet.cattle.io": {
				Types:           []interface{}{"./pkg/apis/fleet.cattle.io/v1alpha1"},
				GenerateTypes:   true,
				GenerateClients: true,
			},
		},
	})
}
