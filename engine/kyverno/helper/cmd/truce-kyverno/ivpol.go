package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	celcompiler "github.com/kyverno/kyverno/pkg/cel/compiler"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	ivpolengine "github.com/kyverno/kyverno/pkg/cel/policies/ivpol/engine"
	"github.com/kyverno/kyverno/pkg/config"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	eval "github.com/kyverno/kyverno/pkg/image/verification/evaluator"
	apiutils "github.com/kyverno/kyverno/pkg/utils/api"
	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// recordingIvpolEngine is Kyverno's ImageValidatingPolicy engine,
// recording for the review it runs in each policy whose evaluation reached
// for a registry (image data, signatures, attestations, digests), which
// truce's offline transport refused. Kyverno's engine decides which writes
// a policy matches (matchConstraints, matchConditions, exceptions,
// matchImageReferences); a policy it does not evaluate, or that matched
// no image, reaches no registry and is not recorded.
type recordingIvpolEngine struct {
	ivpolengine.Engine
	configuration config.Configuration
}

func (e recordingIvpolEngine) HandleValidating(ctx context.Context, req ivpolengine.EngineRequest, p ivpolengine.Predicate) (eval.ImageVerifyEngineResponse, error) {
	r, err := e.Engine.HandleValidating(ctx, req, p)
	e.record(ctx, r)
	return r, err
}

func (e recordingIvpolEngine) HandleMutating(ctx context.Context, req ivpolengine.EngineRequest, p ivpolengine.Predicate) (eval.ImageVerifyEngineResponse, []jsonpatch.JsonPatchOperation, error) {
	r, patches, err := e.Engine.HandleMutating(ctx, req, p)
	e.record(ctx, r)
	return r, patches, err
}

func (e recordingIvpolEngine) record(ctx context.Context, r eval.ImageVerifyEngineResponse) {
	for _, p := range r.Policies {
		if p.Result.Status() != engineapi.RuleStatusError || !isOffline(p.Result.Message()) {
			continue
		}
		name := p.Policy.GetName()
		if ns := p.Policy.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		what := "the images it matched"
		if images := e.matchedImages(p.Policy, r.Resource); len(images) > 0 {
			what = strings.Join(images, ", ")
		}
		record(ctx, fmt.Sprintf("Kyverno %s %s: verifying %s needs a registry, which truce does not contact offline (%s)",
			p.Policy.GetKind(), name, what, p.Result.Message()))
	}
}

// matchedImages names the images of resource the policy's
// matchImageReferences select, as Kyverno extracts and matches them for
// digest pinning (its default image extractors); empty when they find
// none (custom image extractors, extraction from custom workloads).
func (e recordingIvpolEngine) matchedImages(policy policiesv1beta1.ImageValidatingPolicyLike, resource *unstructured.Unstructured) []string {
	if resource == nil || resource.Object == nil {
		return nil
	}
	env, err := celcompiler.NewMatchImageEnv()
	if err != nil {
		return nil
	}
	refs, errs := celcompiler.CompileMatchImageReferences(field.NewPath("spec", "matchImageReferences"), env, policy.GetSpec().MatchImageReferences...)
	if len(errs) > 0 {
		return nil
	}
	infos, err := apiutils.ExtractImagesFromResource(*resource, nil, e.configuration)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, byPointer := range infos {
		for _, info := range byPointer {
			image := info.String()
			if ok, err := matching.MatchImage(image, refs...); err == nil && ok {
				seen[image] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Strings(out)
	return out
}
