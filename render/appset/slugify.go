package appset

import (
	"fmt"
	"sync"

	"github.com/gosimple/slug"
)

// slugMu guards gosimple/slug's package settings (MaxLength,
// EnableSmartTruncate), which Argo CD sets on every slugify call: calls
// take turns, so concurrent renders cannot see each other's settings.
var slugMu sync.Mutex

// slugify is Argo CD's goTemplate function slugify
// (applicationset/utils.SlugifyName, v3.6.1): slugify [maxSize
// [smartTruncate]] name, maxSize 50 and smart truncation by default, the
// name sanitized as normalize does, then made a slug by
// github.com/gosimple/slug, the library Argo CD uses. Arguments between
// smartTruncate and name are ignored, as Argo CD ignores them (it logs
// them).
func slugify(args ...any) (out string, err error) {
	maxSize, smart, name := 50, true, ""
	for i, a := range args {
		var ok bool
		switch i {
		case len(args) - 1:
			name, ok = a.(string)
		case 0:
			maxSize, ok = a.(int)
		case 1:
			smart, ok = a.(bool)
		default:
			ok = true
		}
		if !ok {
			// Argo CD's type assertion panics, which fails the template.
			return "", fmt.Errorf("slugify: argument %d is %T", i+1, a)
		}
	}
	sanitized := SanitizeName(name)
	slugMu.Lock()
	defer slugMu.Unlock()
	defer func() {
		// A negative maxSize without smart truncation slices out of
		// range in the library, failing the template in Argo CD too.
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("slugify: maxSize %d: %v", maxSize, r)
		}
	}()
	slug.EnableSmartTruncate = smart
	slug.MaxLength = maxSize
	return slug.Make(sanitized), nil
}
