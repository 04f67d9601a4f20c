package admission

import (
	"errors"
	"fmt"

	"github.com/truce-dev/truce/manifest"
)

// WithSource prefixes an InvalidObjectError with the file and line of the
// object it names, found among objs (what the state was loaded from).
func WithSource(err error, objs []manifest.Object) error {
	var invalid *InvalidObjectError
	if !errors.As(err, &invalid) {
		return err
	}
	gvk := invalid.Object.GroupVersionKind()
	for _, o := range objs {
		if o.Object.GroupVersionKind().GroupKind() == gvk.GroupKind() && o.Object.GetName() == invalid.Object.GetName() &&
			(o.Object.GetNamespace() == invalid.Object.GetNamespace() || o.Object.GetNamespace() == "") {
			return fmt.Errorf("%s: %w", o.Source, err)
		}
	}
	return err
}
