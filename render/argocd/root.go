package argocd

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/manifest"
)

// repositoryRoot returns the root reading dir is confined to, absolute and
// free of symlinks: root when set, else the nearest directory at or above
// dir holding .git (as package manifest decides), else dir.
func repositoryRoot(dir, root string) (string, error) {
	if root == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return "", err
		}
		root = abs
		for d := abs; ; {
			if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
				root = d
				break
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// inside reports whether path is strictly below root; both are clean and
// absolute.
func inside(path, root string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// withDefaults fills unset limits as package manifest does, so that they
// can be compared against here.
func withDefaults(o manifest.Options) manifest.Options {
	d := manifest.DefaultOptions()
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = d.MaxFileBytes
	}
	if o.MaxTotalBytes <= 0 {
		o.MaxTotalBytes = d.MaxTotalBytes
	}
	return o
}
