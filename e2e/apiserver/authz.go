package apiserver

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitForAuthorization polls a SubjectAccessReview until user (with groups,
// plus system:authenticated as impersonation adds it) may perform verb on
// obj, or timeout passes; it reports whether access was granted.
//
// The RBAC authorizer works from informer caches too, so RBAC objects a case
// just created may not be in effect yet, and the admission sentinel does not
// cover them. Unlike admission configuration, a "no" here may also be the
// case's intended answer, so the caller picks a short timeout and goes on
// either way.
func (s *Server) WaitForAuthorization(ctx context.Context, user string, groups []string, verb string, obj *unstructured.Unstructured, timeout time.Duration) (bool, error) {
	mapping, err := s.ResourceFor(ctx, obj.GroupVersionKind())
	if err != nil {
		return false, err
	}
	ns := obj.GetNamespace()
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && ns == "" {
		ns = metav1.NamespaceDefault
	}
	allGroups := append([]string(nil), groups...)
	if !contains(allGroups, "system:authenticated") {
		allGroups = append(allGroups, "system:authenticated")
	}
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: allGroups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns,
				Verb:      verb,
				Group:     mapping.Resource.Group,
				Version:   mapping.Resource.Version,
				Resource:  mapping.Resource.Resource,
				Name:      obj.GetName(),
			},
		},
	}
	allowed := false
	err = poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		out, err := s.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			// At the end of the wait the client's rate limiter refuses
			// to wait past the deadline ("would exceed context
			// deadline") before ctx itself is done: that is the
			// timeout, not a failure.
			if dl, ok := ctx.Deadline(); ctx.Err() != nil || (ok && time.Until(dl) < time.Second) {
				return false, nil
			}
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		allowed = out.Status.Allowed
		return allowed, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		// Timed out without access: an answer, not a failure.
		return false, nil
	}
	return allowed, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
