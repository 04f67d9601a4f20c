package manifest

import "strings"

// OriginLine returns the line where the object kustomize built as kind,
// name and namespace starts among objs, the objects decoded from the file
// its origin annotation (config.kubernetes.io/origin) names; 0 means no
// unambiguous match. kustomize records the file but not the document, and
// may have renamed the object (namePrefix, nameSuffix, namespace), so the
// candidate is chosen by kind, then the longest original name the built
// name contains, then namespace.
func OriginLine(objs []Object, kind, name, namespace string) int {
	if len(objs) == 1 {
		return objs[0].Source.Line
	}
	best, bestScore, tie := 0, 0, false
	for _, o := range objs {
		on := o.Object.GetName()
		score := 0
		switch {
		case on == "":
			continue
		case on == name:
			score = 1 << 12
		case strings.Contains(name, on):
			score = len(on) << 2 // the longest original name that fits wins
		default:
			continue
		}
		if o.Object.GetKind() == kind {
			score += 1 << 20
		}
		if o.Object.GetNamespace() == namespace {
			score++
		}
		switch {
		case score > bestScore:
			best, bestScore, tie = o.Source.Line, score, false
		case score == bestScore:
			tie = true
		}
	}
	if tie {
		return 0
	}
	return best
}
