package world

import "context"

func (s *state) ociSource(ctx context.Context, namespace, name string) (string, error) {
	return "", unpredictable("OCIRepository "+namespace+"/"+name, "not yet")
}
